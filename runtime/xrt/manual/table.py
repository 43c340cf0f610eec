"""The shape of the manual-name table, and the one installer that acts on it.

Each row (`ManualName`) says, for one name the Icraft XRT manual uses, where it lives
(`owner`: a class by its public path, ``"xrt.MemPtr"``, or a module, ``"xir"``), what we
call it (`ours`) and what kind of alias it is (`Kind`). `install_aliases` puts the class
aliases in place when `xrt` is imported; `module_face` fills the manual's modules (``xir``,
``host_backend``, ...) when they are imported. docs/api-mapping.md is generated from the
same rows (tools/gen_api_mapping.py), and tests/runtime/test_manual_names.py checks that
every row resolves and that no name of the manual is missing.

An alias holds no code of its own. A `Kind.SAME` or `Kind.STATIC` alias resolves, on every
access, to exactly what our name gives (the very function, classmethod or property value):
a subclass that overrides ``close`` answers ``Close`` with its own ``close``. The one
adapter is `Kind.PROPERTY`: the manual calls as a method (``ptr.isNull()``) what we expose
as a property (``ptr.is_null``), so the alias is a method returning that property. Where
the manual's name is our property's own name (``ptr.addr()``), `Kind.ACCESSOR` rows say
the property's value answers the call.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from xrt.errors import ErrorCode, XrtError

__all__ = ["Kind", "ManualName", "Section", "install_aliases", "module_face", "resolve"]


class Kind(Enum):
    """What a row's manual name is, in Python."""

    SAME = "same"
    """``Owner.manual`` is ``Owner.ours``: the same function, classmethod or property (and
    nothing to install when the names are equal)."""
    PROPERTY = "property"
    """``obj.manual()`` returns ``obj.ours``, a property or attribute (the one adapter)."""
    ACCESSOR = "accessor"
    """``obj.manual()`` and ``obj.manual`` both give our attribute of the same name: its
    value answers the call (`xrt.accessor`: an address is an int that called gives
    itself, a chunk or device called returns itself). Nothing to install."""
    STATIC = "static"
    """A static constructor: ``Owner.Manual(...)`` is ``Owner.ours(...)``, or a module
    function when `ours` is a dotted path (``Backend.Create`` is
    `xrt.backend.create_backend`)."""
    CLASS = "class"
    """A class or enum under the manual's name in a module (``xrt.PtrType`` is
    `xrt.PtrKind`); `ours` is a dotted path."""
    MODULE = "module"
    """A name a manual module exports (``xir.Network``): `ours` is a dotted path."""
    FORM = "form"
    """A call form of a name another row maps (a constructor's signatures, operators):
    documented, nothing to install."""
    DIFFERS = "differs"
    """No alias: the manual's name has another Python form (`ours`; the row says why)."""
    ADDED = "added"
    """Ours only: the manual has no such name (documented beside the manual's)."""


INSTALLED = (Kind.SAME, Kind.PROPERTY, Kind.STATIC)
"""Kinds that put an attribute on a class."""


@dataclass(frozen=True)
class ManualName:
    """One name of the manual and ours.

    Attributes:
        owner: Where the manual's name lives: a class by its public dotted path
            (``"xrt.session.Session"``) or a module (``"xir"``, ``"xrt"``).
        manual: The manual's identifier (``"stepTo"``); empty for `Kind.ADDED`.
        ours: Our identifier on `owner` (``"step_to"``), or a dotted path for `Kind.CLASS`,
            `Kind.MODULE` and module-function `Kind.STATIC` rows; empty when our form is no
            single name (`Kind.DIFFERS` rows whose `doc_ours` says it).
        kind: What the alias is.
        notes: The documentation's notes on the row.
        differs: Where we differ from the manual on purpose, and why.
        doc_manual: The manual's column in the documentation, when more than the name.
        doc_ours: Our column in the documentation, when more than the name.
    """

    owner: str
    manual: str
    ours: str
    kind: Kind
    notes: str = ""
    differs: str = ""
    doc_manual: str = ""
    doc_ours: str = ""

    @property
    def owner_name(self) -> str:
        """The owner's last name (``"Session"``)."""
        return self.owner.rpartition(".")[2]

    def manual_cell(self) -> str:
        """The manual's column of the documentation."""
        if self.doc_manual:
            return self.doc_manual
        if not self.manual:
            return "-"
        if self.kind is Kind.STATIC:
            return f"`{self.owner_name}::{self.manual}()`"
        if self.kind in (Kind.CLASS, Kind.MODULE):
            return f"`{self.owner}.{self.manual}`"
        if self.kind is Kind.ACCESSOR:
            return f"`{self.manual}()`"
        return f"`{self.manual}`"

    def ours_cell(self) -> str:
        """Our column of the documentation."""
        if self.doc_ours:
            return self.doc_ours
        if self.kind is Kind.STATIC and "." not in self.ours:
            return f"`{self.owner_name}.{self.ours}()`"
        if self.kind is Kind.ACCESSOR:
            return f"`{self.ours}` or `{self.ours}()`"
        return f"`{self.ours}`"

    def notes_cell(self) -> str:
        """Notes, then where we differ on purpose."""
        parts = [self.notes] if self.notes else []
        if self.differs:
            label = "No alias" if self.kind is Kind.DIFFERS else "Differs"
            parts.append(f"*{label}:* {self.differs}")
        return "; ".join(parts)


@dataclass(frozen=True)
class Section:
    """The rows of one table of the documentation (`key` names it in the template)."""

    key: str
    rows: tuple[ManualName, ...]


def resolve(path: str) -> Any:
    """The object at a dotted path (``"xrt.session.Session"``, ``"builtins.str"``): the
    longest importable module prefix, then attributes."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise XrtError(ErrorCode.WRONG_TYPE, f"manual table: nothing at {path!r}")


class _Alias:
    """The manual's name for one of ours: every access gives what `ours` gives there."""

    def __init__(self, row: ManualName) -> None:
        self.row = row
        self.__doc__ = f"The manual's ``{row.manual}``: ``{row.ours}``."

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        return getattr(owner if obj is None else obj, self.row.ours)


class _Static:
    """The manual's static constructor for a module function (``Backend.Create``)."""

    def __init__(self, row: ManualName, function: Callable[..., Any]) -> None:
        self.row = row
        self.function = function
        self.__doc__ = function.__doc__

    def __get__(self, obj: object, owner: type | None = None) -> Callable[..., Any]:
        return self.function


def _property_method(row: ManualName, cls: type) -> Callable[[Any], Any]:
    ours = row.ours

    def method(self: Any) -> Any:
        return getattr(self, ours)

    method.__name__ = row.manual
    method.__qualname__ = f"{cls.__qualname__}.{row.manual}"
    method.__doc__ = f"``self.{ours}`` (the manual calls it as ``{row.manual}()``)."
    method.manual_name = row  # type: ignore[attr-defined]  # marks it as this row's adapter
    return method


def _declares(cls: type, name: str) -> bool:
    """Whether instances of `cls` have attribute `name`: a class attribute, or one
    annotated on the class (dataclass fields)."""
    return hasattr(cls, name) or any(
        name in vars(k).get("__annotations__", {}) for k in cls.__mro__
    )


def _alias_value(row: ManualName, cls: type) -> object:
    if row.kind is Kind.PROPERTY:
        return _property_method(row, cls)
    if row.kind is Kind.STATIC and "." in row.ours:
        return _Static(row, resolve(row.ours))
    return _Alias(row)


def _is_this_alias(existing: object, row: ManualName) -> bool:
    mine = getattr(existing, "row", None) or getattr(existing, "manual_name", None)
    return isinstance(mine, ManualName) and (mine.ours, mine.kind) == (row.ours, row.kind)


def _install_on_class(row: ManualName) -> None:
    cls = resolve(row.owner)
    if not isinstance(cls, type):
        raise XrtError(ErrorCode.WRONG_TYPE, f"manual table: {row.owner} is not a class")
    if row.manual == row.ours:
        return  # nothing to install (instance attributes included: the tests check those)
    if "." not in row.ours and not _declares(cls, row.ours):
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"manual table: {row.owner} has no {row.ours!r} for the manual's {row.manual!r}",
        )
    for k in cls.__mro__:
        existing = vars(k).get(row.manual)
        if existing is not None and not _is_this_alias(existing, row):
            # A typo in the table must not shadow real code.
            raise XrtError(
                ErrorCode.WRONG_TYPE,
                f"manual table: {k.__qualname__}.{row.manual} exists already; the alias for "
                f"{row.ours!r} would replace it",
            )
    if row.manual not in vars(cls):
        setattr(cls, row.manual, _alias_value(row, cls))


def _install_in_module(row: ManualName, namespace: MutableMapping[str, Any]) -> bool:
    """Bind ``namespace[row.manual]``; True when the name is new there."""
    value = resolve(row.ours)
    existing = namespace.get(row.manual, value)
    if existing is not value:
        raise XrtError(
            ErrorCode.WRONG_TYPE,
            f"manual table: {row.owner}.{row.manual} is {existing!r}, not {row.ours}",
        )
    new = row.manual not in namespace
    namespace[row.manual] = value
    return new


def install_aliases(rows: Iterable[ManualName], namespace: MutableMapping[str, Any]) -> list[str]:
    """Install every class alias of `rows` and bind the rows owned by ``xrt`` in
    `namespace` (the ``xrt`` package's globals); return the names ``xrt`` exports for the
    manual (for its ``__all__``).

    Raises:
        XrtError: 11010 naming the row when an alias would replace an existing attribute,
            or when our name does not exist.
    """
    exported: list[str] = []
    for row in rows:
        if row.kind in INSTALLED and row.owner not in _MODULE_OWNERS:
            _install_on_class(row)
        elif row.owner == "xrt" and row.kind in (Kind.CLASS, Kind.MODULE):
            _install_in_module(row, namespace)
            exported.append(row.manual)
    return exported


_MODULE_OWNERS = {"xrt", "xir", "host_backend", "buyi_backend", "zg330_backend"}
"""The modules of the manual's examples (``import xir``, ``from xrt import *``, ...)."""


def module_face(
    module: str, rows: Iterable[ManualName], namespace: MutableMapping[str, Any]
) -> list[str]:
    """Fill one of the manual's modules (`namespace`, its globals) with its rows; return
    its ``__all__``.

    Raises:
        XrtError: 11010 when `module` is not one of the manual's modules.
    """
    if module not in _MODULE_OWNERS:
        raise XrtError(ErrorCode.WRONG_TYPE, f"{module!r} is not a module of the manual")
    names = []
    for row in rows:
        if row.owner == module and row.kind in (Kind.CLASS, Kind.MODULE):
            _install_in_module(row, namespace)
            names.append(row.manual)
    return sorted(names)
