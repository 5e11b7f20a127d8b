"""User-facing errors. Each message names the problem and what to do about it."""


class NormvizError(Exception):
    """Base class of every error normviz raises for a user to read."""


class UnknownModelError(NormvizError):
    """The model name is neither an embedded model, a local directory nor a reachable Hub id."""


class HubUnreachableError(NormvizError):
    """The Hugging Face Hub could not be reached to fetch a model."""


class UnsupportedModelError(NormvizError):
    """The architecture (or one of its options) cannot be analysed exactly."""


class MissingPackageError(NormvizError):
    """An embedded model's pip package is not installed."""


class EmptyInputError(NormvizError):
    """The text to analyse is empty or only whitespace."""


class InputError(NormvizError):
    """A value typed into a control (a token range …) cannot be used; the message says what to type."""


class UnknownKeyError(NormvizError):
    """A requested map key (or family name) is not registered."""


UnknownMethodError = UnknownKeyError  # the older name (keys were once called methods)


class NotApplicableError(NormvizError):
    """A map key exists but does not apply to this model (e.g. ``ff_res_ln`` on a pre-LN model)."""


class TooCostlyError(NormvizError):
    """A method refuses an input that would take too long or too much memory."""


class ServerBusyError(TooCostlyError):
    """The server's memory budget is taken by other visitors' texts (the app's NORMVIZ_SERVER_MEMORY_MB)."""


class DeadlineError(TooCostlyError):
    """A costly computation ran past its deadline (its cost budget with a margin) and was stopped."""


class TruncationWarning(UserWarning):
    """The text was longer than the model's window and was truncated."""
