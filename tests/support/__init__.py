"""Builders the tests share (tiny datasets, folders, models and paths); no tests here."""
