"""``--framework jax==0.9.2,jax==0.10.2,torch``: framework names with an optional exact version.

A version is an exact PEP 440 public version (``0.9.2``, ``2.20.0``, ``1.9.0.1``,
``2.15.0.post1``, ``0.5.0rc1``): no ranges, no wildcards, no local labels, because a
figure belongs to one release. No version means the one installed beside gradmem.
"""

import re

from harness.choices import ChoiceError, check_choice

# PEP 440, appendix B (public versions only: no "+local")
_VERSION = re.compile(
    r"""^v?(?:(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*
    (?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview)[-_.]?[0-9]*)?
    (?:-[0-9]+|[-_.]?(?:post|rev|r)[-_.]?[0-9]*)?
    (?:[-_.]?dev[-_.]?[0-9]*)?)$""",
    re.VERBOSE | re.IGNORECASE,
)


def check_version(text, what="version"):
    """`text` if it is an exact PEP 440 public version, else ChoiceError saying so."""
    if not _VERSION.match(text or ""):
        raise ChoiceError(
            f"{what} {text!r} is not an exact PEP 440 version (e.g. 0.9.2, 2.20.0, 1.9.0.1, 0.5.0rc1; "
            f"no ranges, wildcards or +local labels)"
        )
    return text[1:] if text[:1] in "vV" else text


def parse_item(text, valid):
    """'jax==0.9.2' -> ('jax', '0.9.2'); 'jax' -> ('jax', None)."""
    text = text.strip()
    if "==" in text:
        name, version = (part.strip() for part in text.split("==", 1))
        check_choice("framework", name, valid)
        return name, check_version(version, f"{name} version")
    for operator in ("===", ">=", "<=", "~=", "!=", ">", "<", "="):
        if operator in text:
            raise ChoiceError(
                f"--framework {text!r}: only an exact version is accepted (NAME==VERSION, e.g. jax==0.9.2), "
                f"or NAME alone for the installed one"
            )
    return check_choice("framework", text, valid), None


def parse_frameworks(text, valid):
    """[(name, version or None), ...] of a comma list ('all' = every valid name,
    installed); each pair once, in the order given."""
    if text in (None, "", "all"):
        return [(name, None) for name in valid]
    pairs = []
    for item in text.split(","):
        if item.strip():
            pair = parse_item(item, valid)
            if pair not in pairs:
                pairs.append(pair)
    return pairs


def label(name, version):
    return name if version is None else f"{name}=={version}"
