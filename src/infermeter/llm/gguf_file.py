"""GGUF files as llama.cpp writes them: the header's file type, and the line that installs llama.cpp's binding."""

from __future__ import annotations

from pathlib import Path

INSTALL_HINT = (
    "llama-cpp-python is not installed; install the `llm` extra (`make install-llm`, or "
    "CMAKE_ARGS=-DGGML_NATIVE=OFF pip install 'infermeter[llm]'; it compiles llama.cpp, several minutes)"
)


def gguf_file_type(path: Path) -> str:
    """The GGUF file type of `path` as a lowercase name (`f16`, `q4_k_m`…), read from its header."""
    from gguf import GGUFReader, LlamaFileType

    reader = GGUFReader(str(path))
    field = reader.get_field("general.file_type")
    if field is None:
        return "unknown"
    value = int(field.parts[field.data[0]][0])
    try:
        name = LlamaFileType(value).name
    except ValueError:
        return f"file_type_{value}"
    return name.removeprefix("MOSTLY_").removeprefix("ALL_").lower()
