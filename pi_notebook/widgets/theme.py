"""The AgentView's stylesheet (our own, trusted CSS), sent once per view.

Everything is scoped under ``.pi-agent`` (a class on the view's root box) and uses
JupyterLab's CSS variables with light-theme fallbacks, so the view follows the
Lab theme and still looks right in the classic Notebook or a saved HTML export.
Pygments token colours come as two sets: a light style, and a dark one selected by
the ``data-jp-theme-light="false"`` attribute JupyterLab puts on ``<body>``.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["stylesheet", "STATUS_COLOURS"]

# status -> (background, text colour) of the pill in the header and on tool cards.
STATUS_COLOURS: dict[str, tuple[str, str]] = {
    "starting": ("#e8eaed", "#3c4043"),
    "thinking": ("#ede7f6", "#5e35b1"),
    "writing": ("#e3f2fd", "#1565c0"),
    "running tool": ("#fff3e0", "#e65100"),
    "running": ("#fff3e0", "#e65100"),
    "waiting for approval": ("#fff8e1", "#8d6e00"),
    "preparing": ("#e8eaed", "#3c4043"),
    "queued": ("#e8eaed", "#3c4043"),
    "aborting": ("#fce4ec", "#ad1457"),
    "done": ("#e8f5e9", "#2e7d32"),
    "no result": ("#fff3e0", "#b04a00"),  # "done · no result": answered, but every call failed
    "aborted": ("#fce4ec", "#ad1457"),
    "skipped": ("#f1f3f4", "#5f6368"),
    "error": ("#ffebee", "#c62828"),
    "idle": ("#e8eaed", "#3c4043"),
    "removed": ("#f1f3f4", "#5f6368"),
    "interrupted": ("#fce4ec", "#ad1457"),
    "timed out": ("#fce4ec", "#ad1457"),
}

_BASE_CSS = """
.pi-agent { font-family: var(--jp-ui-font-family, system-ui, -apple-system, "Segoe UI", sans-serif);
  font-size: var(--jp-content-font-size1, 13px); color: var(--jp-content-font-color1, #1f2328);
  border: 1px solid var(--jp-border-color2, #e1e4e8); border-radius: 8px; padding: 6px 10px 8px 10px;
  background: var(--jp-layout-color0, #fff); max-width: 100%; box-sizing: border-box; }
.pi-agent .widget-html, .pi-agent .widget-html-content { margin: 0; line-height: 1.5; width: 100%; }
.pi-agent .widget-html-content { font-size: inherit; }
.pi-agent .pi-hidden-style { display: none; }
/* the transcript scrolls in its own box; column-reverse keeps the newest text in view
   while it grows (no script), and leaves the user's position alone once they scroll up */
.pi-agent .pi-scroll { display: flex; flex-direction: column-reverse; max-height: min(75vh, 900px);
  overflow-y: auto; overflow-x: hidden; }
.pi-agent .pi-scroll > .widget-vbox { flex: 0 0 auto; }
/* header */
.pi-agent .pi-head { display: flex; align-items: center; gap: 10px; flex-wrap: wrap; font-size: 12px;
  color: var(--jp-content-font-color2, #57606a); padding: 2px 0 6px 0; }
.pi-agent .pi-model { font-weight: 600; color: var(--jp-content-font-color1, #1f2328);
  font-family: var(--jp-code-font-family, ui-monospace, SFMono-Regular, Menlo, monospace); }
.pi-agent .pi-pill { display: inline-block; border-radius: 999px; padding: 1px 9px; font-size: 11px;
  font-weight: 600; letter-spacing: .02em; white-space: nowrap; }
.pi-agent .pi-live .pi-dot { display: inline-block; width: 6px; height: 6px; border-radius: 50%;
  background: currentColor; margin-right: 5px; vertical-align: 1px; animation: pi-pulse 1.2s ease-in-out infinite; }
@keyframes pi-pulse { 0%, 100% { opacity: .25 } 50% { opacity: 1 } }
.pi-agent .pi-metric { white-space: nowrap; font-variant-numeric: tabular-nums; }
.pi-agent .pi-ctx { display: inline-flex; align-items: center; gap: 4px; white-space: nowrap; }
.pi-agent .pi-ctx-bar { display: inline-block; width: 56px; height: 5px; border-radius: 3px;
  background: var(--jp-border-color2, #e1e4e8); overflow: hidden; }
.pi-agent .pi-ctx-fill { display: block; height: 100%; background: #7e8ba3; }
.pi-agent .pi-ctx-fill.pi-warn { background: #e39b00; }
.pi-agent .pi-ctx-fill.pi-full { background: #d32f2f; }
.pi-agent .pi-abort button, .pi-agent button.pi-abort { font-size: 12px; }
/* a narrow notebook (800 px with the file browser open leaves ~430 px): the header row wraps,
   Abort goes below the header line instead of out of the view, and the header's own items
   wrap too (nothing is cut to "Abo" or "approval: clic…") */
.pi-agent .pi-head-row { flex-wrap: wrap; row-gap: 2px; }
.pi-agent .pi-head-row > .widget-html { flex: 1 1 auto; min-width: min-content; width: auto; }
.pi-agent .pi-head .pi-pill { white-space: normal; overflow-wrap: anywhere; max-width: 100%; }
.pi-agent .pi-head-row .widget-html-content, .pi-agent .pi-tool .widget-html-content {
  white-space: normal; overflow: visible; text-overflow: clip; }
.pi-agent .pi-head .pi-policy, .pi-agent .pi-approval-line { white-space: normal; }
/* an MCP tool's annotations: small badges, tinted by meaning */
.pi-agent .pi-badge { display: inline-block; border-radius: 4px; padding: 0 6px; font-size: 10.5px;
  font-weight: 600; line-height: 1.6; border: 1px solid; white-space: nowrap; }
.pi-agent .pi-badge-readonly { background: #e8f5e9; color: #1b5e20; border-color: #a5d6a7; }
.pi-agent .pi-badge-destructive { background: #ffebee; color: #b71c1c; border-color: #ef9a9a; }
/* messages */
.pi-agent .pi-msg { margin: 6px 0 2px 0; }
.pi-agent .pi-user { border-left: 3px solid #6b8afd; padding: 2px 0 2px 10px;
  background: var(--jp-layout-color1, #f8f9fb); border-radius: 0 6px 6px 0; }
.pi-agent .pi-user.pi-steer { border-left-color: #f59e0b; }
.pi-agent .pi-user.pi-followup { border-left-color: #10b981; }
/* a run check's turn (the product's, not the user's): grey, its label in its own colour */
.pi-agent .pi-user.pi-check { border-left-color: #8c959f; }
.pi-agent .pi-user.pi-check .pi-label { text-transform: none; letter-spacing: 0; }
.pi-agent .pi-label { font-size: 10.5px; font-weight: 700; text-transform: uppercase; letter-spacing: .06em;
  color: var(--jp-content-font-color2, #57606a); margin-right: 6px; }
.pi-agent .pi-user-text { white-space: pre-wrap; word-break: break-word; }
.pi-agent .pi-other { color: var(--jp-content-font-color2, #57606a); white-space: pre-wrap; }
/* assistant markdown: the live view's Markdown carries JupyterLab's own rendered-Markdown
   classes (jp-RenderedHTMLCommon), so headings, tables and lists look exactly like the
   static transcript that replaces the view. The rules below are fallbacks for other
   frontends, wrapped in :where() so that Lab's rules win wherever they exist. */
.pi-agent .pi-md { overflow-wrap: break-word; overflow-x: auto; padding-right: 0; }
:where(.pi-agent .pi-md) > :first-child { margin-top: 2px; }
:where(.pi-agent .pi-md) > :last-child { margin-bottom: 2px; }
:where(.pi-agent .pi-md) p { margin: 0 0 .6em 0; }
:where(.pi-agent .pi-md) :is(h1, h2, h3, h4) { margin: .7em 0 .35em 0; line-height: 1.25; font-weight: 600; }
:where(.pi-agent .pi-md) h1 { font-size: 1.35em; } :where(.pi-agent .pi-md) h2 { font-size: 1.2em; }
:where(.pi-agent .pi-md) h3 { font-size: 1.08em; } :where(.pi-agent .pi-md) h4 { font-size: 1em; }
:where(.pi-agent .pi-md) :is(ul, ol) { margin: 0 0 .6em 0; padding-left: 1.6em; }
:where(.pi-agent .pi-md) li { margin: .1em 0; }
:where(.pi-agent .pi-md) blockquote { margin: 0 0 .6em 0; padding: 0 .8em;
  border-left: 3px solid var(--jp-border-color2, #d0d7de); color: var(--jp-content-font-color2, #57606a); }
:where(.pi-agent .pi-md) table { border-collapse: collapse; margin: 0 0 .6em 0; font-size: .95em; }
:where(.pi-agent .pi-md) :is(th, td) { border: 1px solid var(--jp-border-color2, #d0d7de); padding: 3px 8px; }
:where(.pi-agent .pi-md) th { background: var(--jp-layout-color2, #f3f4f6); font-weight: 600; }
/* a wide table scrolls inside its own box, as the static transcript's output area does */
.pi-agent .pi-md table { display: block; max-width: 100%; overflow-x: auto; margin-left: 0; margin-right: 0; }
/* math: MathML rendered by the browser; a formula that did not convert shows as code */
.pi-agent .pi-math-block { overflow-x: auto; }
.pi-agent math[display="block"] { display: block math; }
.pi-agent .pi-math-error { color: var(--jp-content-font-color2, #57606a); }
.pi-agent .pi-md a { color: var(--jp-content-link-color, #0969da); text-decoration: none; }
.pi-agent .pi-md a:hover { text-decoration: underline; }
.pi-agent .pi-md a.pi-link-refused { color: inherit; text-decoration: none; }
.pi-agent .pi-md-img { max-width: 100%; }
.pi-agent code { font-family: var(--jp-code-font-family, ui-monospace, SFMono-Regular, Menlo, monospace);
  font-size: .92em; }
.pi-agent .pi-md :not(pre) > code { background: var(--jp-layout-color2, #eff1f3); padding: .1em .35em;
  border-radius: 4px; }
.pi-agent .pi-cursor { display: inline-block; width: .5em; height: 1em; margin-left: 1px; vertical-align: -2px;
  background: var(--jp-brand-color1, #6b8afd); opacity: .6; animation: pi-pulse 1s ease-in-out infinite; }
/* code blocks */
.pi-agent pre.pi-hl, .pi-agent pre.pi-out { margin: 0 0 .6em 0; padding: 7px 10px; border-radius: 6px;
  background: var(--jp-cell-editor-background, #f6f8fa); border: 1px solid var(--jp-border-color3, #eaeef2);
  font-family: var(--jp-code-font-family, ui-monospace, SFMono-Regular, Menlo, monospace);
  font-size: var(--jp-code-font-size, 12.5px); line-height: 1.45; overflow-x: auto; white-space: pre; }
.pi-agent pre.pi-hl code { font-size: inherit; background: none; padding: 0; }
.pi-agent pre.pi-out { white-space: pre-wrap; word-break: break-word; max-height: 360px; overflow-y: auto;
  background: var(--jp-layout-color1, #fbfbfc); margin: 4px 0 0 0; }
.pi-agent pre.pi-stderr { background: #fff5f5; border-color: #f3d4d4; color: #9a2c2c; }
.pi-agent pre.pi-err { background: #fff5f5; border-color: #f3d4d4; color: #9a2c2c; }
.pi-agent .pi-note { font-size: 11.5px; color: var(--jp-content-font-color3, #8c959f); margin: 2px 0; }
/* thinking */
.pi-agent .pi-thinking-box .p-Collapse-header, .pi-agent .pi-thinking-box .lm-Collapse-header,
.pi-agent .pi-thinking-box .jupyter-widget-Collapse-header {
  font-size: 12px; color: var(--jp-content-font-color3, #8c959f); padding: 3px 8px;
  background: transparent; border: none; font-style: italic; }
.pi-agent .pi-thinking-box .p-Collapse-contents, .pi-agent .pi-thinking-box .lm-Collapse-contents,
.pi-agent .pi-thinking-box .jupyter-widget-Collapse-contents {
  padding: 2px 10px 6px 10px; border: none; background: transparent; }
.pi-agent .pi-thinking-box .jupyter-widget-Collapse, .pi-agent .pi-thinking-box .lm-Collapse,
.pi-agent .pi-thinking-box .p-Collapse { border: none; }
/* expanded, the full text shows: the preview of its last lines would repeat them */
.pi-agent .pi-thinking-block:has(:is(.jupyter-widget-Collapse-open, .lm-Collapse-open, .p-Collapse-open))
  .pi-thinking-preview { display: none; }
/* the newest lines of the preview stay in view: aligned to the bottom, the top clipped */
.pi-agent .pi-thinking-preview { margin: 0 0 2px 8px; max-height: 4.8em; overflow: hidden; display: flex;
  flex-direction: column; justify-content: flex-end; }
.pi-agent .pi-thinking { white-space: pre-wrap; overflow-wrap: break-word; font-size: 12px; font-style: italic;
  color: var(--jp-content-font-color3, #8c959f); border-left: 2px solid var(--jp-border-color2, #e1e4e8);
  padding-left: 8px; }
/* tool cards */
.pi-agent .pi-tool { border: 1px solid var(--jp-border-color2, #e1e4e8); border-radius: 7px;
  padding: 5px 10px 6px 10px; margin: 6px 0; background: var(--jp-layout-color0, #fff); }
.pi-agent .pi-tool.pi-tool-error { border-color: #f3c4c4; }
.pi-agent .pi-tool-head { display: flex; align-items: center; gap: 2px 8px; flex-wrap: wrap; font-size: 12px;
  color: var(--jp-content-font-color2, #57606a); margin-bottom: 3px; }
.pi-agent .pi-tool-name { font-weight: 600; color: var(--jp-content-font-color1, #1f2328);
  font-family: var(--jp-code-font-family, ui-monospace, SFMono-Regular, Menlo, monospace); }
.pi-agent .pi-tool .pi-hl { margin-bottom: 2px; max-height: 420px; overflow-y: auto; }
/* a tool's code wraps: code waiting for approval must be seen whole, never cut at the
   box's right edge (a long line would need a sideways scroll nobody notices). At spaces
   first: Lab's output area sets word-break: break-all on every pre element ("as|cending") */
.pi-agent .pi-tool pre.pi-hl { white-space: pre-wrap; overflow-wrap: anywhere; word-break: normal;
  overflow-x: hidden; }
/* no height limit on the output area: a figure shows at its natural size; long text
   streams scroll in their own box (.pi-stream) */
.pi-agent .pi-outbox { margin-top: 4px; border-radius: 6px;
  border: 1px solid var(--jp-border-color3, #eaeef2); background: var(--jp-layout-color1, #fbfbfc); }
.pi-agent .pi-outbox pre.pi-out { margin: 0; border: none; border-radius: 0; max-height: none;
  overflow: visible; padding: 1px 10px; }
.pi-agent .pi-outbox .widget-vbox > .widget-html:first-child pre.pi-out { padding-top: 6px; }
.pi-agent .pi-outbox > .widget-vbox:last-child .widget-html:last-child pre.pi-out { padding-bottom: 6px; }
.pi-agent .pi-stream { max-height: 360px; overflow-y: auto; }
.pi-agent .pi-outbox .pi-out-img { margin: 4px 10px; max-width: calc(100% - 20px); }
.pi-agent .pi-out-img { max-width: 100%; height: auto; margin-top: 4px; display: block; }
.pi-agent .pi-outbox .widget-html-content { overflow: visible; }
.pi-agent details.pi-tb-full > summary { font-size: 11.5px; cursor: pointer; padding: 2px 10px;
  color: var(--jp-content-font-color3, #8c959f); }
/* approval: text above (wrapping as text), the buttons in a row below (wrapping as a row) */
.pi-agent .pi-approval { gap: 4px; margin: 4px 0 2px 0; padding: 6px 8px;
  background: #fff8e1; border: 1px solid #f5e1a4; border-radius: 6px; }
.pi-agent .pi-approval .widget-html-content { font-size: 12px; color: #6d5600; white-space: normal;
  line-height: 1.45; }
.pi-agent .pi-approval-buttons { flex-wrap: wrap; gap: 6px; }
/* while a call waits for a click: a line held at the bottom of the screen (sticky) as long as
   the view is on it, so a card that opened below the fold is announced there too. Sticky
   sticks inside the nearest box that clips: the view (ipywidgets' box) and JupyterLab's
   output area around a live view leave overflow visible (the view wraps its own content), so
   that box is the notebook's scroller. min-width: 0 keeps what a scroll box had by default: a
   flex item no wider than its row (else a wide table made the view 926 px in a 346 px area) */
.pi-agent.widget-box, .jp-OutputArea:has(.pi-agent), .jp-OutputArea-child:has(.pi-agent),
.jp-OutputArea-output:has(.pi-agent) { overflow: visible; min-width: 0; }
.pi-agent .pi-approval-bar { position: sticky; bottom: 0; z-index: 2; margin: 4px 0 0 0; padding: 3px 9px;
  background: #fff8e1; border: 1px solid #f5e1a4; border-radius: 6px; box-shadow: 0 -2px 6px rgba(0, 0, 0, .08); }
.pi-agent .pi-approval-bar .widget-html-content { font-size: 12px; font-weight: 600; color: #6d5600;
  white-space: normal; }
.pi-agent .pi-approval-buttons button { margin: 0; }
/* what a call did (or may do) to the user's variables */
.pi-agent .pi-ns { font-size: 12px; margin: 2px 10px; line-height: 1.45; white-space: normal;
  overflow-wrap: anywhere; }
.pi-agent .pi-ns ul { margin: 0; padding-left: 18px; }
.pi-agent .pi-invisible-warning { font-size: 12px; font-weight: 600; color: #b3261e; margin: 2px 0 4px 0; }
.pi-agent .pi-invisible { background: #ffdad6; color: #8c1d18; border-radius: 3px; padding: 0 2px;
  font-weight: 600; }
.pi-agent .pi-result-box .jupyter-widget-Collapse-header, .pi-agent .pi-result-box .lm-Collapse-header,
.pi-agent .pi-result-box .p-Collapse-header { font-size: 11.5px; padding: 2px 6px; background: transparent;
  border: none; color: var(--jp-content-font-color3, #8c959f); }
.pi-agent .pi-result-box .jupyter-widget-Collapse-contents, .pi-agent .pi-result-box .lm-Collapse-contents,
.pi-agent .pi-result-box .p-Collapse-contents { padding: 0 0 2px 0; border: none; }
/* notices and queue */
.pi-agent .pi-notice { font-size: 12px; padding: 3px 9px; border-radius: 6px; margin: 4px 0; }
.pi-agent .pi-notice.pi-info { background: var(--jp-layout-color2, #f1f3f5); color: var(--jp-content-font-color2, #57606a); }
.pi-agent .pi-notice.pi-warning { background: #fff8e1; color: #7a5d00; }
.pi-agent .pi-notice.pi-error { background: #ffebee; color: #b71c1c; white-space: pre-wrap; }
.pi-agent .pi-queued-row { align-items: center; gap: 6px; }
.pi-agent .pi-queued { font-size: 12px; color: var(--jp-content-font-color2, #57606a); white-space: nowrap;
  overflow: hidden; text-overflow: ellipsis; }
.pi-agent .pi-queued .pi-pill { background: #f1f3f4; color: #5f6368; margin-right: 6px; }
/* dark theme: the light tinted boxes would glare */
body[data-jp-theme-light="false"] .pi-agent pre.pi-stderr, body[data-jp-theme-light="false"] .pi-agent pre.pi-err {
  background: #3b1f22; border-color: #5e2f33; color: #ffb3b3; }
body[data-jp-theme-light="false"] .pi-agent .pi-approval { background: #3a3117; border-color: #66551f; }
body[data-jp-theme-light="false"] .pi-agent .pi-approval .widget-html-content { color: #f2dc8c; }
body[data-jp-theme-light="false"] .pi-agent .pi-approval-bar { background: #3a3117; border-color: #66551f; }
body[data-jp-theme-light="false"] .pi-agent .pi-approval-bar .widget-html-content { color: #f2dc8c; }
body[data-jp-theme-light="false"] .pi-agent .pi-notice.pi-warning { background: #3a3117; color: #f2dc8c; }
body[data-jp-theme-light="false"] .pi-agent .pi-notice.pi-error { background: #3b1f22; color: #ffb3b3; }
body[data-jp-theme-light="false"] .pi-agent .pi-invisible { background: #5e2f33; color: #ffdad6; }
body[data-jp-theme-light="false"] .pi-agent .pi-invisible-warning { color: #ffb4ab; }
body[data-jp-theme-light="false"] .pi-agent .pi-pill { filter: saturate(.8) brightness(.92); }
body[data-jp-theme-light="false"] .pi-agent .pi-badge-readonly { background: #17301b; color: #a5d6a7; border-color: #2e5e35; }
body[data-jp-theme-light="false"] .pi-agent .pi-badge-destructive { background: #3b1f22; color: #ffb3b3; border-color: #6e3035; }
.pi-agent .pi-remove button, .pi-agent button.pi-remove { min-width: 0; }
/* a view whose kernel is gone (restart): @jupyter-widgets marks every view of it with
   jupyter-widgets-disconnected and puts a broken-link icon before each one. One line on
   the view says it instead, and nothing in it looks live or clickable: no Abort, no
   approval panel or queue buttons, no pulsing dot or cursor (docs/design/waiting.md). */
.pi-agent .jupyter-widgets-disconnected::before { content: none; display: none; }
.pi-agent.jupyter-widgets-disconnected::before {
  content: "This view's kernel is gone (restarted or shut down): the run is not live any more.";
  display: block; font: italic 12px var(--jp-ui-font-family, system-ui, sans-serif);
  color: var(--jp-content-font-color2, #57606a); padding: 0 0 4px 0; align-self: auto; }
.pi-agent.jupyter-widgets-disconnected :is(.pi-abort, .pi-approval, .pi-approval-bar, .pi-remove, .pi-dot, .pi-cursor) {
  display: none !important; }
/* a live pill ("writing", "waiting for approval: python") would still claim work: it says
   "not live" instead */
.pi-agent.jupyter-widgets-disconnected .pi-pill.pi-live { filter: grayscale(1); opacity: .7; font-size: 0; }
.pi-agent.jupyter-widgets-disconnected .pi-pill.pi-live::after { content: "not live"; font-size: 11px; }
/* the Undo button under a finished run (undo_bar.py): gone with its kernel, one line says so */
/* no frame of its own: a row right under the run's transcript; the text beside the button
   while there is room, below it when the notebook is narrow */
.pi-agent.pi-undo { gap: 4px 10px; padding: 6px 0 2px 0; flex-wrap: wrap; border: none; border-radius: 0;
  background: transparent; }
.pi-agent.pi-undo .pi-undo-text, .pi-agent.pi-undo .pi-undo-text .widget-html-content { width: auto;
  flex: 1 1 260px; min-width: 0; }
.pi-agent.pi-undo .pi-undo-line { line-height: 1.4; overflow-wrap: anywhere; }
.pi-agent.pi-undo.jupyter-widgets-disconnected::before {
  content: "Undo of this run: its kernel is gone (restarted or shut down), so there is nothing to restore into."; }
.pi-agent.pi-undo.jupyter-widgets-disconnected :is(.pi-undo-button, .pi-undo-text) { display: none !important; }
"""


@lru_cache(maxsize=1)
def stylesheet() -> str:
    """The full ``<style>`` element for one view (computed once per process)."""
    from pygments.formatters import HtmlFormatter

    light = HtmlFormatter(style="default").get_style_defs(".pi-agent .pi-hl")
    dark = HtmlFormatter(style="github-dark").get_style_defs(
        'body[data-jp-theme-light="false"] .pi-agent .pi-hl')
    # Keep only the token rules (".pi-agent .pi-hl .k { ... }"): the formatters also
    # emit global "pre"/line-number rules and a container background, and our <pre>
    # styling above decides those (the dark theme supplies its own background below).
    token_rules = [r for r in (light + "\n" + dark).splitlines()
                   if ".pi-hl ." in r.split("{")[0]]
    dark_bg = ('body[data-jp-theme-light="false"] .pi-agent pre.pi-hl '
               "{ background: #0d1117; color: #e6edf3; border-color: #30363d; }")
    return "<style>" + _BASE_CSS + "\n".join(token_rules) + "\n" + dark_bg + "\n</style>"
