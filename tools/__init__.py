"""Authoring tools: badges and setup cells, student versions, re-execution (see CONTRIBUTING.md)."""
