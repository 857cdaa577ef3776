"""Downloads into the preset cache: progress on stderr, `.part` files, sha256 checks, safe zip extraction.

Every file is streamed to `<name>.part` and renamed into place only once it is
complete and its sha256 (when known) matches; a mismatch deletes the partial
file and says so. Zip archives are checked member by member before anything is
extracted: absolute paths, `..` components and symbolic links that would write
outside the target directory (zip-slip) are refused. Extraction happens in a
temporary directory that is renamed into the cache, so the cache never holds a
half-extracted preset.

The weight files of a preset are checked before they are read
(`check_safetensors_file`, `check_h5_file`): a truncated or corrupt file is a
one-line `CheckpointFileError` naming the file, the bytes it has against the
bytes its header announces, and what to do.
"""

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import time
import urllib.request
import zipfile

_CHUNK = 1 << 20


class DownloadError(OSError):
    """A download was incomplete, unreachable, or its content did not match the expected digest.

    `short_reason` holds the reason alone (`HTTP 404 Not Found`, `cannot resolve host ...`) when known.
    """

    def __init__(self, message, short_reason=None):
        super().__init__(message)
        self.short_reason = short_reason


def preset_cache_root():
    """The directory that holds downloaded presets (`$KERAS_BERT_IMPL_CACHE` or `~/.cache/keras_bert_impl/presets`)."""
    root = os.environ.get("KERAS_BERT_IMPL_CACHE")
    if root:
        return os.path.abspath(os.path.expanduser(root))
    return os.path.join(os.path.expanduser("~"), ".cache", "keras_bert_impl", "presets")


class CheckpointFileError(ValueError):
    """A checkpoint file exists but cannot be read: truncated, corrupt or of the wrong kind."""


def _replace_hint(path):
    cache_root = preset_cache_root()
    real = os.path.abspath(path)
    if real.startswith(cache_root + os.sep):
        entry = os.path.join(cache_root, os.path.relpath(real, cache_root).split(os.sep)[0])
        return f"delete {entry} and load the preset again to download it afresh"
    return "replace it with a complete copy (copy or download it again)"


def truncated_file_error(path, detail):
    """A one-line `CheckpointFileError` for an unreadable weights file: the file, what is wrong, what to do."""
    return CheckpointFileError(f"{path} cannot be read: {detail}. The file is truncated or corrupt; {_replace_hint(path)}.")


def check_h5_file(path):
    """Raises `CheckpointFileError` (one line naming `path`) when `path` is not a complete HDF5 file."""
    import h5py

    try:
        h5py.File(path, "r").close()
    except OSError as e:
        text = str(e)
        match = re.search(r"eof = (\d+).*stored_eof = (\d+)", text)
        if match:
            detail = f"it has {int(match.group(1))} of the {int(match.group(2))} bytes its header announces"
        elif "signature not found" in text:
            detail = f"it is not an HDF5 file ({os.path.getsize(path)} bytes, no HDF5 signature)"
        else:
            detail = f"h5py says {text!r}"
        raise truncated_file_error(path, detail) from None


def check_safetensors_file(path):
    """Raises `CheckpointFileError` (one line naming `path`) when `path` is not a complete safetensors file."""
    size = os.path.getsize(path)
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            header_length = int.from_bytes(head, "little") if len(head) == 8 else None
            header = json.loads(f.read(header_length)) if header_length and header_length <= size - 8 else None
    except (OSError, ValueError):
        header = None
    if header is None:
        if size < 8:
            detail = f"it has {size} bytes, fewer than the 8-byte header length of a safetensors file"
        elif header_length and header_length > size - 8:
            detail = f"it has {size} bytes, fewer than its own {8 + header_length}-byte header"
        else:
            detail = f"its header is incomplete or not safetensors ({size} bytes)"
        raise truncated_file_error(path, detail)
    ends = [entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"]
    expected = 8 + header_length + max(ends, default=0)
    if size < expected:
        raise truncated_file_error(path, f"it has {size} of the {expected} bytes its header announces")


def _causes(error):
    seen = []
    while error is not None and error not in seen:
        seen.append(error)
        error = error.__cause__ or error.__context__ or getattr(error, "reason", None)
        if not isinstance(error, BaseException):
            break
    return seen


def describe_failure(error, url=None):
    """A short one-line reason for a failed fetch: `cannot resolve host X (no network?)`, `HTTP 404 Not Found`, ...

    Follows the chain of causes (urllib's `URLError`, requests' `ConnectionError`
    wrapping urllib3's `MaxRetryError`) to the root and names the host.
    """
    import socket
    import urllib.error
    import urllib.parse

    chain = _causes(error)
    text = " ".join(str(e) for e in chain)
    host = re.search(r"host='([^']+)'", text)
    host = host.group(1) if host else None
    if host is None and url:
        host = urllib.parse.urlsplit(url).hostname
    if getattr(error, "short_reason", None):
        return error.short_reason
    for e in chain:
        if isinstance(e, urllib.error.HTTPError):
            return f"HTTP {e.code} {e.reason}"
    if any(isinstance(e, socket.gaierror) for e in chain) or "NameResolutionError" in text or "Failed to resolve" in text:
        return f"cannot resolve host {host} (no network or DNS)" if host else "cannot resolve the host name (no network or DNS)"
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or "Connection refused" in text:
        return f"connection refused by {host}" if host else "connection refused"
    if any(isinstance(e, (socket.timeout, TimeoutError)) for e in chain) or "timed out" in text:
        return f"timed out reaching {host}" if host else "timed out"
    first_line = " ".join(str(error).split()).rstrip(".")
    return first_line[:300] or type(error).__name__


def _format_bytes(n):
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return f"{n:.1f} GB"


class _Progress:
    """A one-line progress report on a stream: bytes so far / total, percent, rate."""

    def __init__(self, label, total, stream, interval=0.5):
        if stream == "stderr":
            stream = sys.stderr  # looked up at call time, so redirections of sys.stderr apply
        self.label, self.total, self.stream, self.interval = label, total, stream, interval
        self.start = self.last = time.monotonic()
        self.done = 0

    def update(self, n):
        self.done += n
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self._write(now, end="\r")

    def finish(self):
        self._write(time.monotonic(), end="\n")

    def _write(self, now, end):
        if self.stream is None:
            return
        rate = self.done / max(now - self.start, 1e-6)
        if self.total:
            amount = f"{_format_bytes(self.done)}/{_format_bytes(self.total)} ({100 * self.done / self.total:.0f}%)"
        else:
            amount = _format_bytes(self.done)
        self.stream.write(f"{self.label}: {amount} {_format_bytes(rate)}/s{end}")
        self.stream.flush()


def sha256_of_file(path):
    """Hex sha256 digest of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download_file(url, destination, sha256=None, progress_stream="stderr", timeout=60, headers=None):
    """Downloads `url` to `destination` through `destination.part`, checking size and sha256.

    Args:
        url: http(s) or file URL.
        destination: final file path; written only when the download is complete and verified.
        sha256: expected hex digest, or None when unknown.
        progress_stream: a text stream for progress lines, `"stderr"` (the
            current `sys.stderr`, the default) or None for silence.
        timeout: socket timeout in seconds.
        headers: extra HTTP request headers (e.g. `Authorization`), or None.

    Returns:
        `destination`.

    Raises:
        DownloadError: the server sent fewer bytes than announced, or the
            sha256 differs (the partial file is deleted; both digests are named).

    Example:
    >>> download_file("https://storage.googleapis.com/bert_models/2020_02_20/uncased_L-2_H-128_A-2.zip",
    ...               "/tmp/bert_tiny.zip")  # doctest: +SKIP
    """
    destination = os.fspath(destination)
    os.makedirs(os.path.dirname(os.path.abspath(destination)), exist_ok=True)
    if os.path.exists(destination) and (sha256 is None or sha256_of_file(destination) == sha256):
        return destination
    partial = destination + ".part"
    digest = hashlib.sha256()
    try:
        try:
            response = urllib.request.urlopen(urllib.request.Request(url, headers=headers) if headers else url,
                                              timeout=timeout)
        except OSError as e:  # urllib.error.URLError / HTTPError, socket errors: one line, no chained tracebacks
            reason = describe_failure(e, url)
            raise DownloadError(f"Could not download {url}: {reason}.", short_reason=reason) from None
        with response, open(partial, "wb") as f:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            progress = _Progress(f"Downloading {os.path.basename(destination)}", total, progress_stream)
            while True:
                try:
                    chunk = response.read(_CHUNK)
                except Exception as e:  # http.client.IncompleteRead and socket errors
                    raise DownloadError(f"Download of {url} broke off after {progress.done} bytes: {e}") from None
                if not chunk:
                    break
                f.write(chunk)
                digest.update(chunk)
                progress.update(len(chunk))
            progress.finish()
        if total is not None and progress.done != total:
            raise DownloadError(
                f"Download of {url} is truncated: got {progress.done} of {total} bytes. "
                f"Deleted the partial file {partial}."
            )
        actual = digest.hexdigest()
        if sha256 is not None and actual != sha256:
            raise DownloadError(
                f"sha256 mismatch for {url}: expected {sha256}, got {actual} "
                f"({progress.done} bytes; truncated or corrupted download). Deleted the partial file {partial}."
            )
        os.replace(partial, destination)
        return destination
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(partial)


def _check_member(info, target):
    name = info.filename
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise ValueError(f"Refusing to extract zip member {name!r}: it is a symbolic link (zip-slip risk).")
    path = os.path.realpath(os.path.join(target, name))
    if os.path.isabs(name) or (path != target and not path.startswith(target + os.sep)):
        raise ValueError(
            f"Refusing to extract zip member {name!r}: it would be written outside {target} (zip-slip)."
        )


def extract_zip(zip_path, target_dir):
    """Extracts `zip_path` into a new directory `target_dir`, refusing members that escape it.

    All members are checked before anything is written; extraction goes to a
    temporary directory beside `target_dir` that is renamed at the end.

    Args:
        zip_path: the archive.
        target_dir: directory to create (must not exist yet).

    Raises:
        ValueError: a member has an absolute path, `..` escaping the target,
            or is a symbolic link (zip-slip); nothing is extracted.

    Example:
    >>> extract_zip("uncased_L-2_H-128_A-2.zip", "/tmp/bert_tiny")  # doctest: +SKIP
    """
    target_dir = os.path.abspath(os.fspath(target_dir))
    parent = os.path.dirname(target_dir)
    os.makedirs(parent, exist_ok=True)
    temp_dir = tempfile.mkdtemp(dir=parent, prefix="." + os.path.basename(target_dir) + ".", suffix=".tmp")
    try:
        real_temp = os.path.realpath(temp_dir)
        with zipfile.ZipFile(zip_path) as archive:
            members = archive.infolist()
            for info in members:
                _check_member(info, real_temp)
            archive.extractall(temp_dir, members)
        os.replace(temp_dir, target_dir)
    except BaseException:
        shutil.rmtree(temp_dir, ignore_errors=True)
        raise
    return target_dir


def move_into_cache(source_dir, cache_dir):
    """Renames a complete directory to `cache_dir`, replacing an earlier (unusable) entry."""
    cache_dir = os.path.abspath(cache_dir)
    if os.path.exists(cache_dir):
        old = cache_dir + f".old-{os.getpid()}"
        os.replace(cache_dir, old)
        os.replace(source_dir, cache_dir)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(source_dir, cache_dir)
    return cache_dir


def _find_checkpoint_root(directory):
    for root, _, files in os.walk(directory):
        if "bert_config.json" in files:
            return root
    raise ValueError(f"The archive extracted to {directory} holds no bert_config.json: not a Google BERT release zip.")


def download_google_zip(url, cache_dir, sha256=None, progress_stream="stderr"):
    """Downloads an original Google BERT release zip and unpacks its checkpoint directory to `cache_dir`.

    Args:
        url: URL of the zip (e.g. `https://storage.googleapis.com/bert_models/.../uncased_L-12_H-768_A-12.zip`).
        cache_dir: where the checkpoint directory ends up (`bert_config.json` directly inside).
        sha256: `{zip file name: hex digest}` or None.
        progress_stream: where progress lines go.

    Returns:
        `cache_dir`.

    Example:
    >>> download_google_zip(url, "~/.cache/keras_bert_impl/presets/bert_tiny_en_uncased")  # doctest: +SKIP
    """
    cache_dir = os.path.abspath(os.fspath(cache_dir))
    zip_name = os.path.basename(url.split("?")[0])
    downloads = os.path.join(os.path.dirname(cache_dir), ".downloads")
    zip_path = download_file(url, os.path.join(downloads, zip_name), (sha256 or {}).get(zip_name), progress_stream)
    extracted = os.path.join(downloads, os.path.basename(cache_dir) + f".extract-{os.getpid()}")
    shutil.rmtree(extracted, ignore_errors=True)
    try:
        extract_zip(zip_path, extracted)
    except zipfile.BadZipFile as e:
        os.remove(zip_path)
        raise DownloadError(f"{url} did not give a valid zip archive ({e}); deleted {zip_path}.") from e
    try:
        root = _find_checkpoint_root(extracted)
        move_into_cache(root, cache_dir)
    finally:
        shutil.rmtree(extracted, ignore_errors=True)
    os.remove(zip_path)
    return cache_dir


def download_files(urls, cache_dir, sha256=None, progress_stream="stderr"):
    """Downloads several files (e.g. a Hugging Face repo's config.json, model.safetensors, vocab.txt) into `cache_dir`.

    The files are collected in a temporary directory that becomes `cache_dir`
    only when every file is complete and verified.

    Args:
        urls: `{file name: url}`.
        cache_dir: destination directory.
        sha256: `{file name: hex digest}` for the files whose digest is known.
        progress_stream: where progress lines go.

    Returns:
        `cache_dir`.
    """
    cache_dir = os.path.abspath(os.fspath(cache_dir))
    parent = os.path.dirname(cache_dir)
    os.makedirs(parent, exist_ok=True)
    temp_dir = tempfile.mkdtemp(dir=parent, prefix="." + os.path.basename(cache_dir) + ".", suffix=".tmp")
    try:
        for name, url in urls.items():
            if os.path.basename(name) != name or name in ("", ".", ".."):
                raise ValueError(f"Refusing download file name {name!r}: it must be a plain file name.")
            download_file(url, os.path.join(temp_dir, name), (sha256 or {}).get(name), progress_stream)
        return move_into_cache(temp_dir, cache_dir)
    except BaseException:
        shutil.rmtree(temp_dir, ignore_errors=True)
        raise
