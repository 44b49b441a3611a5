"""The operator console (Textual) and the `frank` CLI: the only package that imports textual."""
