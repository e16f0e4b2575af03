"""Switchyard's control plane: the Flask app, the CLI and the embedded default."""
