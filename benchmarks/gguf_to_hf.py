"""A GGUF model as a Hugging Face folder, so vLLM's CPU build can serve the same weights as llama.cpp.

vLLM 0.32 reads GGUF only through a plugin, and only for some architectures (docs/llm-serving-vllm.md). Hugging Face
transformers reads a GGUF (Llama-family architectures among others) by dequantizing its tensors to FP32, with the
tokenizer and chat template the file carries; saved again, that folder is what vLLM loads. The weights are the
GGUF's quantized values, dequantized: the same model llama.cpp serves, not the original FP16 checkpoint, so a
comparison of the two engines compares engines, not checkpoints (vLLM then computes in its own --dtype).

Run it with the vLLM venv's Python (`make install-vllm` installs transformers, gguf and accelerate there):

    .venv-vllm/bin/python benchmarks/gguf_to_hf.py smollm2-135m build/smollm2-135m-hf

MODEL is a .gguf path, or the name of a packaged model (`smollm2-135m`) when infermeter is installed in that venv.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def gguf_path(model: str) -> Path:
    """A .gguf path as given, or the file of a packaged model infermeter knows by name."""
    if model.endswith(".gguf"):
        return Path(model)
    from infermeter.llm.packaged import packaged_gguf  # only for names; a path needs no infermeter

    return packaged_gguf(model)


def convert(source: Path, out: Path) -> None:
    """Dequantize SOURCE's tensors and write model, tokenizer and chat template to OUT."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name)
    # transformers marks a model read from GGUF as "quantized" and refuses to save it, though its tensors are
    # already plain FP32 after loading: drop the marker so the folder is an ordinary FP32 checkpoint.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a .gguf path or a packaged model name (smollm2-135m)")
    parser.add_argument("out", type=Path, help="the Hugging Face folder to write")
    args = parser.parse_args()
    source = gguf_path(args.model)
    if not source.is_file():
        sys.exit(f"error: no GGUF file at {source}")
    started = time.monotonic()
    convert(source, args.out)
    print(f"wrote {args.out} from {source} in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
