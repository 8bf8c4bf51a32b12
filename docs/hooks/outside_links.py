"""MkDocs hook: a guide's relative link to a file outside docs/ becomes a link to the repository.

The guides link the checkout's other documents relatively (`../benchmarks/README.md#...`), so
that the links work on GitHub and in a checkout. MkDocs knows only the files under docs/ and
warns on those links, which `--strict` makes fatal; on the site they point to the file in the
repository instead (``repo_url``/blob/main/...). A link to a file that the checkout lacks is an
error, as a broken link between guides is.
"""

from __future__ import annotations

import logging
import os
import re

log = logging.getLogger("mkdocs.plugins.outside_links")

# [text](target) in Markdown, where target is relative and leaves docs/ (starts with ../).
_LINK = re.compile(r"(\]\()(\.\./[^)\s#]+)(#[^)\s]*)?(\))")


def on_page_markdown(markdown: str, page, config, files) -> str:
    docs_dir = config["docs_dir"]
    page_dir = os.path.dirname(os.path.join(docs_dir, page.file.src_path))
    root = os.path.dirname(os.path.abspath(config["config_file_path"]))
    base = config["repo_url"].rstrip("/") + "/blob/main/"

    def rewrite(match: re.Match) -> str:
        target = os.path.normpath(os.path.join(page_dir, match.group(2)))
        relative = os.path.relpath(target, root)
        if relative.startswith("..") or relative.startswith("docs" + os.sep):
            return match.group(0)  # outside the checkout, or inside docs/: MkDocs checks it
        if not os.path.exists(target):
            log.warning("%s links to %s, which is not in the checkout", page.file.src_path,
                        match.group(2))
            return match.group(0)
        return (match.group(1) + base + relative.replace(os.sep, "/") + (match.group(3) or "")
                + match.group(4))

    return _LINK.sub(rewrite, markdown)
