"""The errors of a labelled table file (`table_files.read_table`): one `TableFormatError` subclass per problem.

Each is a `ValueError` whose message is one line, `file, line N, column 'c': problem`
(`keras_bert_impl.file_errors.FileFormatError`'s format), so a caller can catch one kind (an `UnknownLabelError`)
or all of them.
"""

from keras_bert_impl.file_errors import FileFormatError


class TableFormatError(FileFormatError):
    """A problem in a table file; the message is one line naming the file, the line and the column.

    The one-line `file, line, column: problem` format is `keras_bert_impl.file_errors.FileFormatError`'s.
    """


class MissingColumnError(TableFormatError):
    """A column named by the caller is not in the header (or a JSON line lacks the key)."""


class EmptyTextError(TableFormatError):
    """A text field is empty or only whitespace."""


class UnknownLabelError(TableFormatError):
    """A validation or test label that the training file does not have."""


class LabelValueError(TableFormatError):
    """A label that cannot be used: a non-numeric or non-finite regression label, or a missing label."""


class TableEncodingError(TableFormatError):
    """A byte that is not valid UTF-8 (`keras_bert_impl.file_errors.decode_utf8`)."""


class RaggedRowError(TableFormatError):
    """A CSV/TSV row whose number of fields differs from the header's."""


class JsonLineError(TableFormatError):
    """A line of a JSON Lines file that is not valid JSON or not a JSON object."""


class EmptyTableError(TableFormatError):
    """A file with no header, or a header and no rows."""
