"""Evaluation: every benchmark task, one typed result, aggregation and output folders in one package."""
