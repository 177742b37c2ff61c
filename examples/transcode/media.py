"""The FFmpeg side of the transcode example: a test video, its segments, their encodes, and
the concatenation. FFmpeg is the binary the ``imageio-ffmpeg`` package ships, so nothing
has to be installed on the system. Every function blocks: the executor runs them in a thread.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import imageio_ffmpeg
from opentelemetry import trace

__all__ = ["PROFILES", "concat", "frames", "generate", "split", "transcode"]

FPS = 10
SIZE = "160x90"

PROFILES: dict[str, list[str]] = {
    # "{profile}-{version}": the encoder settings of that version of the profile. A new set
    # of settings is a new version (a new business key), never a change to an old one.
    "h264-v1": ["-c:v", "libx264", "-preset", "veryfast", "-crf", "30"],
    "h264-v2": ["-c:v", "libx264", "-preset", "veryfast", "-crf", "26", "-vf", "scale=128:72"],
    "mpeg4-v1": ["-c:v", "mpeg4", "-q:v", "5"],
}
_AUDIO = ["-c:a", "aac", "-b:a", "48k"]
tracer = trace.get_tracer("examples.transcode")  # recording only once an SDK is configured


def _ffmpeg(*args: str | Path) -> None:
    command = [imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y"]
    with tracer.start_as_current_span("ffmpeg", attributes={"ffmpeg.args": list(map(str, args))}):
        done = subprocess.run([*command, *map(str, args)], capture_output=True, check=False)
    if done.returncode != 0:
        error = done.stderr.decode(errors="replace").strip()[-2000:]
        raise RuntimeError(f"ffmpeg exited with {done.returncode}: {error}")


def generate(path: Path, seconds: float) -> Path:
    """A test video (FFmpeg's ``testsrc`` picture and a ``sine`` tone), with a key frame
    every second so that it can be cut on whole seconds without re-encoding."""
    _ffmpeg(
        "-f", "lavfi", "-i", f"testsrc=size={SIZE}:rate={FPS}:duration={seconds}",
        "-f", "lavfi", "-i", f"sine=frequency=440:duration={seconds}",
        "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
        "-g", str(FPS), "-keyint_min", str(FPS), "-sc_threshold", "0",
        *_AUDIO, "-shortest", path,
    )  # fmt: skip
    return path


def split(source: Path, folder: Path, seconds: int) -> list[Path]:
    """Cut ``source`` into segments of ``seconds`` (stream copy, at key frames)."""
    _ffmpeg(
        "-i", source, "-map", "0", "-c", "copy", "-f", "segment",
        "-segment_time", str(seconds), "-reset_timestamps", "1", folder / "segment-%d.mp4",
    )  # fmt: skip
    return sorted(folder.glob("segment-*.mp4"), key=lambda p: int(p.stem.split("-")[1]))


def transcode(source: Path, target: Path, profile: str) -> Path:
    """Encode ``source`` with the settings of ``profile`` (``{profile}-{version}``)."""
    _ffmpeg("-i", source, *PROFILES[profile], "-pix_fmt", "yuv420p", *_AUDIO, "-f", "mp4", target)
    return target


def concat(parts: list[Path], target: Path) -> Path:
    """Join ``parts``, in order, into one file (FFmpeg's concat demuxer, stream copy)."""
    listing = target.with_suffix(".txt")
    listing.write_text("".join(f"file '{part.resolve()}'\n" for part in parts))
    _ffmpeg("-f", "concat", "-safe", "0", "-i", listing, "-c", "copy", target)
    return target


def frames(path: Path) -> int:
    """How many video frames FFmpeg decodes from ``path`` (it fails on a broken file)."""
    count, _seconds = imageio_ffmpeg.count_frames_and_secs(str(path))
    return int(count)
