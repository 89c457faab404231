"""Ed25519 keys and signatures for compiled-constraint artifacts, through the ``cryptography``
package (the ``sign`` extra: ``pip install 'corral[sign]'``).

In:  keys as key objects, PEM bytes, raw 32-byte keys, or paths of key files that
     :func:`write_keypair` (``corral keygen``) wrote.
Out: raw 32-byte public keys and 64-byte signatures (what the artifact's signature block holds)
     and yes/no verification.

Invariants: no cryptography is written here — every primitive is the ``cryptography`` package's;
the package is imported only when a key or signature is actually used, so corral without the
extra loads unsigned artifacts and only signing/verifying asks for it (:class:`ImportError`
naming the extra).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "KeyLike",
    "PUBLIC_KEY_BYTES",
    "SIGNATURE_BYTES",
    "fingerprint",
    "public_keys",
    "sign",
    "verify",
    "write_keypair",
]

PUBLIC_KEY_BYTES = 32
SIGNATURE_BYTES = 64

KeyLike = Any
"""A key: a ``cryptography`` Ed25519 key object, PEM bytes, raw 32 bytes, or a key file path."""

_EXTRA = "signing and verifying artifacts needs the 'cryptography' package: pip install 'corral[sign]'"


def _ed25519() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise ImportError(_EXTRA) from None
    return ed25519


def _serialization() -> Any:
    _ed25519()
    from cryptography.hazmat.primitives import serialization

    return serialization


def fingerprint(public_raw: bytes) -> str:
    """A short, stable name for a public key in messages: ``ed25519:`` + 16 hex digits of its
    SHA-256."""
    return "ed25519:" + hashlib.sha256(public_raw).hexdigest()[:16]


def _read(value: KeyLike, what: str) -> bytes | None:
    """The bytes of a key given as a path (None when ``value`` is not a path)."""
    if isinstance(value, (str, os.PathLike)):
        path = Path(value)
        try:
            return path.read_bytes()
        except OSError as e:
            raise OSError(f"cannot read the {what} key file {str(path)!r}: {e.strerror or e}") from None
    return None


def private_key(value: KeyLike) -> Any:
    """An Ed25519 private key object from ``value`` (object, PEM, raw 32-byte seed or path).
    Raises ValueError for anything that is not an unencrypted Ed25519 private key."""
    ed = _ed25519()
    if isinstance(value, ed.Ed25519PrivateKey):
        return value
    data = _read(value, "private")
    if data is None:
        data = value
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"a signing key is a key object, bytes or a path, got {type(value).__name__}")
    if len(data) == PUBLIC_KEY_BYTES:
        return ed.Ed25519PrivateKey.from_private_bytes(bytes(data))
    try:
        key = _serialization().load_pem_private_key(bytes(data), password=None)
    except (ValueError, TypeError) as e:
        raise ValueError(f"not an unencrypted PEM Ed25519 private key ({e})") from None
    if not isinstance(key, ed.Ed25519PrivateKey):
        raise ValueError(f"the signing key is a {type(key).__name__}, not an Ed25519 private key")
    return key


def public_raw(value: KeyLike) -> bytes:
    """The raw 32 bytes of an Ed25519 public key given as an object, PEM, raw bytes, a path of a
    ``.pub`` file, or a private key (its public half)."""
    ed = _ed25519()
    ser = _serialization()
    if isinstance(value, ed.Ed25519PublicKey):
        return bytes(value.public_bytes(ser.Encoding.Raw, ser.PublicFormat.Raw))
    if isinstance(value, ed.Ed25519PrivateKey):
        return public_raw(value.public_key())
    data = _read(value, "public")
    if data is None:
        data = value
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"a trusted key is a key object, bytes or a path, got {type(value).__name__}")
    if len(data) == PUBLIC_KEY_BYTES:
        return bytes(data)
    if b"PRIVATE KEY" in data:
        return public_raw(private_key(bytes(data)))
    try:
        key = ser.load_pem_public_key(bytes(data))
    except (ValueError, TypeError) as e:
        raise ValueError(f"not a PEM Ed25519 public key ({e})") from None
    if not isinstance(key, ed.Ed25519PublicKey):
        raise ValueError(f"the trusted key is a {type(key).__name__}, not an Ed25519 public key")
    return public_raw(key)


def public_keys(trusted: KeyLike | Iterable[KeyLike]) -> list[bytes]:
    """The raw public keys of a trusted-key set (one key or an iterable of keys)."""
    ed = _ed25519()
    single = (str, bytes, bytearray, os.PathLike, ed.Ed25519PublicKey, ed.Ed25519PrivateKey)
    items = [trusted] if isinstance(trusted, single) else list(trusted)
    return [public_raw(k) for k in items]


def sign(data: bytes, key: KeyLike) -> tuple[bytes, bytes]:
    """(raw public key, 64-byte Ed25519 signature of ``data``)."""
    k = private_key(key)
    return public_raw(k.public_key()), bytes(k.sign(data))


def verify(data: bytes, public: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is ``public``'s Ed25519 signature of ``data``."""
    ed = _ed25519()
    from cryptography.exceptions import InvalidSignature

    try:
        ed.Ed25519PublicKey.from_public_bytes(public).verify(signature, data)
    except (InvalidSignature, ValueError):
        return False
    return True


def write_keypair(path: str | os.PathLike[str], *, overwrite: bool = False) -> tuple[Path, Path, str]:
    """Generate a key pair: the private key as unencrypted PKCS#8 PEM at ``path`` (mode 0600)
    and the public key as PEM at ``path + ".pub"``. Returns (private path, public path,
    fingerprint). Refuses to replace existing files unless ``overwrite``."""
    ed = _ed25519()
    ser = _serialization()
    priv_path = Path(path)
    pub_path = Path(str(path) + ".pub")
    for p in (priv_path, pub_path):
        if p.exists() and not overwrite:
            raise FileExistsError(f"{str(p)!r} exists; not replacing a key (remove it first)")
    key = ed.Ed25519PrivateKey.generate()
    pem = key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption())
    pub = key.public_key().public_bytes(ser.Encoding.PEM, ser.PublicFormat.SubjectPublicKeyInfo)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    fd = os.open(priv_path, flags, 0o600)  # never readable by others, not even briefly
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    pub_path.write_bytes(pub)
    return priv_path, pub_path, fingerprint(public_raw(key.public_key()))
