"""stateward: a governed workflow engine with a live GraphQL API."""

__version__ = "0.1.0"
