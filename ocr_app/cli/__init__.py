"""Command-line shells over the library: they parse options, call it, and turn its errors into exit codes."""
