"""What the crafted trees of difftrees.py are made with: the Case a tree
builder returns, the registry of builders (CASES, filled by the @case
decorator), and the writers of files and metadata directories.
"""

import dataclasses
import pathlib
from typing import Callable, Dict, List, Optional

OK = "ok"                    # importlib answers; epload must answer the same
RAISES = "raises"            # importlib raises; epload must exit 1 naming a file
UNSUPPORTED = "unsupported"  # importlib reads a zip; epload must refuse clearly


@dataclasses.dataclass
class Case:
    paths: List[str]
    expect: str = OK
    # For OK: whether the answer must be non-empty (guards the fixture).
    nonempty: bool = True
    # For RAISES / UNSUPPORTED: a substring epload's message must contain
    # (the offending file, relative to the tree root, or an absolute path).
    names: Optional[str] = None
    # Working directory for both sides (for '' and relative paths).
    cwd: Optional[str] = None
    # Compare ep.dist.name / ep.dist.version too (off where importlib itself
    # cannot produce them).
    compare_dist: bool = True
    # A reason to skip, decided at build time (e.g. running as root).
    skip: Optional[str] = None


CASES: Dict[str, Callable[[pathlib.Path], Case]] = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def write(path: pathlib.Path, data, mode: str = "w") -> pathlib.Path:
    """Writes text (UTF-8, no newline translation) or bytes, making parents."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


def dist(site: pathlib.Path, dirname: str, entry_points=None, metadata=None,
         metadata_file: str = "METADATA") -> pathlib.Path:
    """A metadata directory with optional entry_points.txt and METADATA."""
    d = site / dirname
    d.mkdir(parents=True, exist_ok=True)
    if metadata is None:
        stem = dirname.rsplit(".", 1)[0]
        name, _, version = stem.partition("-")
        metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version or '0'}\n"
    if metadata is not False:
        write(d / metadata_file, metadata)
    if entry_points is not None:
        write(d / "entry_points.txt", entry_points)
    return d


def one_dist(root: pathlib.Path, dirname: str, entry_points, metadata=None, **case) -> Case:
    """A case of one metadata directory (see dist()) in one search path,
    root/site; ``case``: Case's other fields."""
    site = root / "site"
    dist(site, dirname, entry_points, metadata=metadata)
    return Case([str(site)], **case)
