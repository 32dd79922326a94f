"""The library's one exception type; only the CLI and UI turn it into a message and an exit code."""


class OcrError(Exception):
    """A problem the user can act on, described in one line."""


class InputError(OcrError):
    """A document cannot be read: missing, empty, corrupt, encrypted, unsupported."""


class ConfigError(OcrError):
    """A preset or option is invalid."""


class ModelError(OcrError):
    """A model folder is missing pieces or is inconsistent (e.g. an MTP head that would not load)."""
