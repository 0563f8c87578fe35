"""Find the file tools of folders. The files are imported in a tool process, never in this one.

    tools = scan("./tools", Path.home() / "more_tools")
    tools.schema["add"]      # {"name", "description", "input_schema", "source": "file", ...extra keys}
    tools.handlers["add"]    # FileTool(name="add", path=".../tools/add.py", folder=".../tools", ...)

Every `*.py` file under a folder is imported (recursively; hidden folders and __pycache__ are
skipped); its public module-level tools (dicts with `name` and `execute`, `@tool` functions, and
lists/tuples of them) are registered by name, each from the file that defines it. Later folders
win a name clash. A file that fails to import fails the whole scan: a broken tools folder should
be seen at once, not turn into a tool that silently went missing.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import AgentError
from .decorator import check_name, durable_flags
from .handlers import FileTool, ToolSet

if TYPE_CHECKING:
    from .runner import ToolPool

log = logging.getLogger("agentcore")


@dataclass(frozen=True)
class Folder:
    """A scanned folder at one moment: its .py files and their (mtime, size) stamp."""

    root: str
    files: tuple[str, ...]
    stamp: tuple[tuple[str, int, int], ...]
    version: str


def scan(*dirs: str | os.PathLike[str], pool: ToolPool | None = None) -> ToolSet:
    """The file tools of `dirs`, as a ToolSet.

    Args:
        dirs: folders (str or `pathlib.Path`); later ones override same-named tools of earlier ones.
        pool: the tool-process pool to scan in (its kill_running() and close() interrupt the
            scan); default the shared pool. The scanning process ends before this returns.

    Raises:
        AgentError: kind "tool": a folder does not exist, a file fails to import (the message
            names the file and the cause), or a tool in it is malformed.
    """
    folders = [snapshot(folder) for folder in dirs]
    if not any(folder.files for folder in folders):
        return ToolSet()
    if pool is None:
        from .runner import shared_pool

        pool = shared_pool()
    specs = [{"root": f.root, "version": f.version, "files": list(f.files)} for f in folders]
    described = pool.scan(specs)
    schema: dict[str, dict[str, Any]] = {}
    handlers: dict[str, FileTool] = {}
    for folder, tools in zip(folders, described, strict=True):
        for tool in tools:
            name = str(tool["name"])
            check_name(name, f"tool {name!r} of {tool['path']}")
            previous = handlers.get(name)
            if previous is not None and previous.folder == folder.root:
                log.warning(
                    "tool %r is defined in both %s and %s; the latter wins", name, previous.path, tool["path"]
                )
            schema[name] = _schema_entry(tool)
            handlers[name] = FileTool(
                name=name,
                path=str(tool["path"]),
                folder=folder.root,
                timeout=tool.get("timeout"),
                stamp=folder.stamp,
                version=folder.version,
            )
    return ToolSet(schema, handlers)


def snapshot(folder: str | os.PathLike[str]) -> Folder:
    """The .py files of `folder` (sorted, recursive) and a version that changes with any edit."""
    import hashlib

    root = os.path.realpath(os.fspath(folder))
    if not os.path.isdir(root):
        raise AgentError(f"tool folder not found (or not a folder): {os.fspath(folder)}", kind="tool")
    stamp: list[tuple[str, int, int]] = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d != "__pycache__")
        for name in names:
            if not name.endswith(".py") or name.startswith("."):
                continue
            path = os.path.join(directory, name)
            try:
                info = os.stat(path)
            except OSError:
                continue
            stamp.append((os.path.relpath(path, root), info.st_mtime_ns, info.st_size))
    stamp.sort()
    version = hashlib.sha1(repr((root, stamp)).encode("utf-8")).hexdigest()[:16]
    files = tuple(os.path.join(root, rel) for rel, _, _ in stamp)
    return Folder(root=root, files=files, stamp=tuple(stamp), version=version)


def _schema_entry(tool: dict[str, Any]) -> dict[str, Any]:
    core = {
        "name": tool["name"],
        "description": tool.get("description") or "",
        "input_schema": tool["input_schema"],
    }
    extra = dict(tool.get("extra") or {})
    durable_flags(f"tool {tool['name']!r} in {tool.get('path')}", extra)
    return {**core, **extra, "source": "file"}
