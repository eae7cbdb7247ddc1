"""What the reader raises: every problem names the file and, for damage, the
dataset and the row, so that nothing damaged is ever read as numbers."""


class RankscopeError(Exception):
    """Any problem reading a rankscope file."""


class NotATimelineError(RankscopeError):
    """The file is not a rankscope timeline (or not HDF5 at all)."""


class UnsupportedVersionError(RankscopeError):
    """The timeline's format version is newer than this package reads."""


class DamagedTimelineError(RankscopeError):
    """A dataset, row or field of the timeline is damaged: its checksum does
    not match, HDF5 refuses to read it, or a value is impossible."""

    def __init__(self, path, dataset, row, problem):
        self.path, self.dataset, self.row, self.problem = path, dataset, row, problem
        where = dataset if row is None else f"{dataset} row {row}"
        super().__init__(f"{path}: {where}: {problem}")


class MissingTableError(RankscopeError):
    """The timeline lacks a table the question needs (written by an older
    rankscope)."""
