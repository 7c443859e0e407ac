"""Small version helpers shared by the compatibility tables, the facts and the patches (pure functions, no I/O)."""

from __future__ import annotations

import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version


def vtuple(text: str | None) -> tuple[int, ...]:
    """``"11.4"`` -> ``(11, 4)``; ``"470.82.01"`` -> ``(470, 82, 1)``; junk -> ``()``."""
    if not text:
        return ()
    out = []
    for part in str(text).split("."):
        m = re.match(r"\d+", part)
        if not m:
            break
        out.append(int(m.group()))
    return tuple(out)


def major_minor(text: str | None) -> str | None:
    """``"11.4.152"`` -> ``"11.4"``; None when not a version."""
    t = vtuple(text)
    if len(t) < 2:
        return f"{t[0]}.0" if t else None
    return f"{t[0]}.{t[1]}"


def split_local(version: str) -> tuple[str, str | None]:
    """``"1.8.2+cu111"`` -> ``("1.8.2", "cu111")``; strips a leading ``==``."""
    text = version.strip().removeprefix("==").strip()
    base, _, local = text.partition("+")
    return base, (local or None)


def pinned(spec: str | None) -> str | None:
    """The exact version of ``"1.8.2"``/``"==1.8.2"``/``"1.8.2+cu111"``; None for ranges."""
    if not spec:
        return None
    base, _ = split_local(spec)
    if re.fullmatch(r"\d+(\.\d+)*([a-z]+\d*)?(\.post\d+)?", base):
        return base
    return None


def admits(spec: str | None, version: str) -> bool:
    """Whether a version spec (exact or PEP 440 range; None = anything) admits ``version``."""
    if spec is None or spec.strip() in ("", "*"):
        return True
    exact = pinned(spec)
    if exact is not None:
        return Version(exact) == Version(version)
    try:
        return SpecifierSet(spec).contains(version, prereleases=True)
    except InvalidSpecifier:
        return True


def version_lt(a: str, b: str) -> bool:
    """``a < b`` as release versions (local tags ignored); unparsable -> False."""
    try:
        return Version(split_local(a)[0]).release < Version(split_local(b)[0]).release
    except InvalidVersion:
        return False


def cuda_of_tag(tag: str | None) -> str | None:
    """Wheel tag -> CUDA version: ``"cu111"`` -> ``"11.1"``, ``"cu130"`` -> ``"13.0"``, cpu -> None."""
    if not tag or not tag.startswith("cu"):
        return None
    digits = tag[2:]
    if not digits.isdigit() or len(digits) < 2:
        return None
    return f"{int(digits[:-1])}.{digits[-1]}"

