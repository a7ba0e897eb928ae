"""What agent code does to the user's names: read before it runs, compared after, undone on
request (docs/design/review.md). Pure Python over a namespace mapping: no IPython here."""

from .changes import ChangeReport, NameChange, compare, snapshot
from .reading import CodeEffects, NameEffect, read_code
from .undo import UndoReport
from .watch import NamespaceReview, Preview, review_for

__all__ = ["ChangeReport", "CodeEffects", "NameChange", "NameEffect", "NamespaceReview", "Preview",
           "UndoReport", "compare", "read_code", "review_for", "snapshot"]
