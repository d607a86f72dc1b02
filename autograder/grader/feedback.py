"""What a learner is shown about graded work: feedback files and nbgrader's Validate.

nbgrader's feedback HTML shows each test cell as it was graded: hidden tests included, and with a
full traceback that quotes the failing source line (nbgrader issue #917).
:class:`HideHiddenTests` removes the hidden region from test cells and shortens each error to
``ExceptionName: message`` (the checks' messages are written to be safe to show).

In a class, learner code can also *observe* the hidden tests while they run (an IPython hook sees
every cell's source) and print them, from a later cell or inside the failing test's own error
message. So :class:`ClassroomFeedback` also drops every output except the error line of a failed
test cell, caps that line, and blanks any line of hidden-test source that appears in it. What
remains learner-controlled is one capped line per failed test.
"""

from __future__ import annotations

import functools
import html
import re
from html.parser import HTMLParser

from bleach import ALLOWED_PROTOCOLS, ALLOWED_TAGS
from jinja2 import BytecodeCache
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbconvert.preprocessors.sanitize import SanitizeHTML
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder import nbcell
from autograder.grader.messages import explain_error

HIDDEN_REGION = re.compile(
    r"^[ \t]*### BEGIN HIDDEN TESTS.*?^[ \t]*### END HIDDEN TESTS[^\n]*\n?",
    re.DOTALL | re.MULTILINE,
)
HIDDEN_NOTE = "# (hidden tests run here; their code is not shown)\n"


class HideHiddenTests(NbGraderPreprocessor):
    """Strip hidden tests from test cells and shorten their tracebacks."""

    def preprocess_cell(self, cell, resources, cell_index):
        if nbcell.is_test(cell):
            cell.source = HIDDEN_REGION.sub(HIDDEN_NOTE, cell.source)
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    output.traceback = [f"{output.ename}: {output.evalue}"]
        return cell, resources


class _CompiledTemplates(BytecodeCache):
    """Compiled Jinja templates, kept for the life of the process, keyed as Jinja keys them (by
    template name and file) and checked against their source's checksum when loaded."""

    def __init__(self):
        self._code: dict[str, bytes] = {}

    def load_bytecode(self, bucket) -> None:
        if bucket.key in self._code:
            bucket.bytecode_from_string(self._code[bucket.key])

    def dump_bytecode(self, bucket) -> None:
        self._code[bucket.key] = bucket.bytecode_to_string()


_COMPILED = _CompiledTemplates()


_IMG = re.compile(r"<img\b[^>]*>", re.IGNORECASE)
_QUOTED = re.compile(r"""=\s*("[^"]*"|'[^']*')""")
_ALT = re.compile(r"(?<![\w-])alt\b", re.IGNORECASE)
_TAB_STOP = re.compile(
    r'(<div\b[^>]*\bclass="[^"]*\b(?:jp-Cell-inputWrapper|jp-OutputArea-output)\b[^"]*")'
)
NO_ALT_TEXT = "No description has been provided for this image"


def _with_alt(tag: re.Match) -> str:
    """An ``<img>`` tag given nbconvert's alt text unless one of its attributes is ``alt``
    (read outside quoted values: ``src="alt=1.png"`` or ``data-alt`` is not one)."""
    if _ALT.search(_QUOTED.sub("=", tag[0])):
        return tag[0]
    return f'{tag[0][:4]} alt="{NO_ALT_TEXT}"{tag[0][4:]}'


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTML exporter that compiles its templates once per process and marks up the
    page by pattern instead of parsing it.

    nbgrader makes a new exporter, with a new Jinja environment, for every feedback file, and
    compiling the templates again was a tenth of a grading worker's CPU per notebook. After the
    template, ``HTMLExporter`` parses the whole page with BeautifulSoup (200-300 kB, most of it
    inlined CSS) to give images without one an ``alt`` text and cells' input and output a tab
    stop, and writes it out again: 0.24 CPU-s per feedback file, half of making it. Here the same
    attributes go onto the tags its template writes; ``tests/test_feedback.py`` holds the page to
    the same document as ``HTMLExporter``'s.
    """

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = _COMPILED
        return environment

    def from_notebook_node(self, nb, resources=None, **kw):
        """``HTMLExporter.from_notebook_node`` (nbconvert 7) with its BeautifulSoup step done by
        pattern: the same filters, the same template, the same attributes added."""
        langinfo = nb.metadata.get("language_info", {})
        lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
        highlight_code = self.filters.get(
            "highlight_code", _KeptHighlight(pygments_lexer=lexer, parent=self)
        )
        resources = self._init_resources(resources)
        filter_data_type = WidgetsDataTypeFilter(
            notebook_metadata=self._nb_metadata, parent=self, resources=resources
        )
        self.register_filter("highlight_code", highlight_code)
        self.register_filter("filter_data_type", filter_data_type)
        page, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        page = _IMG.sub(_with_alt, page)
        return _TAB_STOP.sub(r'\1 tabindex="0"', page), resources


class _KeptHighlight(Highlight2HTML):
    """nbconvert's code highlighting, each cell's HTML kept for the life of the process: the
    notebooks of a class share most of their code cells, and pygments was about 3 % of a
    grading worker's time on the class run."""

    def __call__(self, source, language=None, metadata=None):
        magics = metadata.get("magics_language") if metadata else None
        options = self.extra_formatter_options
        try:
            key = tuple(sorted(options.items()))
            hash(key)
        except TypeError:  # an option pygments takes that cannot be a key: highlight afresh
            return super().__call__(source, language, metadata)
        return _highlighted(source, language or self.pygments_lexer, magics, key)


@functools.lru_cache(maxsize=4096)
def _highlighted(source: str, language: str, magics: str | None, options: tuple) -> str:
    highlight = Highlight2HTML(pygments_lexer=language, extra_formatter_options=dict(options))
    return highlight(source, language, {"magics_language": magics} if magics else None)


MESSAGE_CHARS = 300
REDACTED = "[hidden test]"


def hidden_lines(nb) -> list[str]:
    """Lines of hidden-test source worth redacting (long enough to be specific)."""
    lines = set()
    for cell in nb.cells:
        if not nbcell.is_test(cell):
            continue
        for block in HIDDEN_REGION.findall(cell.source):
            for line in block.splitlines()[1:-1]:
                if len(line.strip()) >= 8:
                    lines.add(line.strip())
    return sorted(lines, key=len, reverse=True)


def redact(text: str, lines: list[str]) -> str:
    for line in lines:
        text = text.replace(line, REDACTED)
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


class ClassroomFeedback(HideHiddenTests):
    """Hidden tests removed, outputs dropped, failed tests' one-line messages kept (redacted)."""

    def preprocess(self, nb, resources):
        self._hidden = hidden_lines(nb)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.cell_type != "code":
            return cell, resources
        kept = []
        if nbcell.is_test(cell):
            errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
            for output in errors[-1:]:
                output.ename = redact(str(output.ename), self._hidden)[:80]
                output.evalue = redact(str(output.evalue).strip().split("\n")[0], self._hidden)
                output.traceback = [f"{output.ename}: {output.evalue}"]
                kept.append(output)
        cell.outputs = kept
        return cell, resources


# Markup a person may see from a learner: bleach's allow-list, with plain tables and text blocks.
SAFE_TAGS = sorted(
    {*ALLOWED_TAGS, "p", "br", "pre", "div", "span", "h1", "h2", "h3", "h4"}
    | {"table", "thead", "tbody", "tr", "th", "td", "sub", "sup", "hr", "dl", "dt", "dd"}
)


class _Links(HTMLParser):
    """The ``href`` and ``src`` of every tag in a page, as a browser reads them."""

    def __init__(self):
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.urls += [value or "" for name, value in attrs if name in ("href", "src")]


def _safe_url(url: str) -> bool:
    """A link a browser follows without running anything: no scheme, or http, https, mailto.
    (Browsers drop whitespace and control characters inside a scheme: so does this.)"""
    plain = re.sub(r"[\x00-\x20\x7f]", "", url).lower()
    scheme = re.match(r"([a-z][a-z0-9+.-]*):", plain)
    return scheme is None or scheme[1] in ALLOWED_PROTOCOLS


@functools.lru_cache(maxsize=4096)  # a class's notebooks share most of their markdown
def safe_markdown(source: str) -> bool:
    """Whether ``source``, rendered as nbconvert renders markdown, links only to safe URLs.

    bleach reads HTML, not markdown: ``[x](javascript:…)``, ``![x](data:…)`` and reference
    links pass through it as text and become links only when a page renders the markdown.
    """
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    links = _Links()
    links.feed(markdown2html_mistune(source))
    return all(_safe_url(url) for url in links.urls)


def _as_text(source: str) -> str:
    return f"<pre>{html.escape(source)}</pre>"


class Sanitize(SanitizeHTML):
    """What a person opens carries no script from a learner (nbconvert's bleach allow-list).

    Markdown, raw cells and HTML outputs keep only :data:`SAFE_TAGS` (links keep http, https and
    mailto; everything else is escaped as text); outputs keep text, PNG, JPEG, LaTeX and JSON,
    and lose every other type: JavaScript, SVG, widget views, anything a browser would run.
    Markdown (a cell or a ``text/markdown`` output) whose rendering would link anywhere else
    (``javascript:``, ``data:``) is shown as its escaped source text (:func:`safe_markdown`).
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.tags = SAFE_TAGS

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.cell_type == "markdown" and not safe_markdown(cell.source):
            cell.source = _as_text(cell.source)
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "text/markdown" in data and not safe_markdown(str(data["text/markdown"])):
                data["text/markdown"] = _as_text(str(data["text/markdown"]))
        return cell, resources


def sanitize(nb) -> None:
    """``nb``'s learner-made markup and outputs, made inert in place (:class:`Sanitize`)."""
    Sanitize().preprocess(nb, {})


# nbconvert's ansi2html (which nbgrader's Validate runs on each error) writes a 24-bit colour as
# `<span style="color: rgb(25,100,170)">`: the course's custom.css finds the score line by it.
SCORE_COLOUR = (25, 100, 170)
SCORE_START, SCORE_END = "\x1b[38;2;{};{};{}m".format(*SCORE_COLOUR), "\x1b[0m"


class ValidationSummary:
    """nbclient cell hooks for nbgrader's Validate (JupyterLab's button, ``nbgrader validate``).

    Validate lists each failing test cell with its error output's traceback. These hooks make that
    the one-line diagnosis ``check`` prints (a failing check's own rendering is kept: its sentence,
    then the learner's frames when learner code raised) and put the score line before the first
    one, in :data:`SCORE_COLOUR`: nbgrader's dialog can only show it inside that cell's box, and
    the course's ``custom.css`` lifts it from there to the top of the dialog. nbconvert runs no
    notebook-level hooks, so the score is kept up to date cell by cell.
    """

    def __init__(self):
        self.points: dict[int, float] = {}  # id(test cell) -> its points
        self.failed: dict[int, float] = {}
        self.first = None  # the first failing cell's error output, and its own traceback
        self.first_traceback: list[str] = []

    def cell_started(self, cell, cell_index, **_) -> None:
        if cell_index == 0:
            self.__init__()
        if nbcell.is_test(cell):
            self.points[id(cell)] = nbcell.points(cell)
        self._headline()

    def cell_failed(self, cell, cell_index, **_) -> None:
        errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        if not nbcell.is_test(cell) or not errors:
            return
        for output in errors:
            if output.ename != "CheckFailure":
                output.traceback = [explain_error(output.ename, str(output.evalue))]
        self.points.setdefault(id(cell), nbcell.points(cell))
        self.failed[id(cell)] = self.points[id(cell)]
        if self.first is None:
            self.first, self.first_traceback = errors[-1], list(errors[-1].traceback)
        self._headline()

    def _headline(self) -> None:
        if self.first is None:
            return
        total, lost = sum(self.points.values()), sum(self.failed.values())
        n = len(self.failed)
        cells = "1 test cell fails" if n == 1 else f"{n} test cells fail"
        headline = f"Score: {total - lost:g} / {total:g} points; {cells}, each shown below."
        first, *rest = self.first_traceback or [""]
        # The newline sits inside the coloured span: lifted out, it leaves no blank line behind.
        self.first.traceback = [f"{SCORE_START}{headline}\n{SCORE_END}{first}", *rest]


_SUMMARY = (
    ValidationSummary()
)  # one Validate at a time: autograder.grader.lab_validate holds a lock


def _cell_started(**kwargs) -> None:
    _SUMMARY.cell_started(**kwargs)


def _cell_failed(**kwargs) -> None:
    _SUMMARY.cell_failed(**kwargs)


def validation_hooks(c) -> None:
    """Install :class:`ValidationSummary` on the Execute step of nbgrader's Validator only.

    (Plain functions: traitlets deep-copies configured values, bound methods and all.)
    """
    c.Validator.Execute.on_cell_start = _cell_started
    c.Validator.Execute.on_cell_error = _cell_failed
