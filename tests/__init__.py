"""The test suite. A package (as is every folder under it) so that test files may share a name in different
folders and import the shared builders of `tests.support`; test modules never import one another."""
