"""Read rankscope's timelines and reports as pandas frames (docs/python.md).

    import rankscope
    with rankscope.open("job.h5") as t:
        steps = t.steps()
        kernels = t.kernels()
"""

from .errors import (DamagedTimelineError, MissingTableError, NotATimelineError, RankscopeError,
                     UnsupportedVersionError)
from .report import Report, report
from .timeline import Timeline, open  # noqa: A004 - rankscope.open

__version__ = "0.1.0"
__all__ = ["open", "report", "Timeline", "Report", "RankscopeError", "NotATimelineError", "UnsupportedVersionError",
           "DamagedTimelineError", "MissingTableError"]
