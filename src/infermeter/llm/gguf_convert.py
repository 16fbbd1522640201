"""Hugging Face Llama folder -> GGUF (F32 or F16), written with the `gguf` package's GGUFWriter.

llama.cpp's own `convert_hf_to_gguf.py` is not installed by any pip package (it ships only inside the
llama-cpp-python sdist, with the whole llama.cpp tree), so this module does the same conversion for the Llama
architecture: the same tensor names, the same Q/K row permutation (HF's rotate-half RoPE layout -> llama.cpp's
interleaved layout, as `LlamaModel.permute` in convert_hf_to_gguf.py) and the same metadata keys. Other
architectures: convert with llama.cpp's script and pass the GGUF path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.core.errors import ModelError

OUT_TYPES = ("f32", "f16")


def permute_qk(weights: np.ndarray, heads: int) -> np.ndarray:
    """Reorder the rows of a Q or K projection from HF's half-split RoPE layout to llama.cpp's interleaved one."""
    return (
        weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def _tensor_name(hf_name: str) -> str | None:
    fixed = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }
    if hf_name in fixed:
        return fixed[hf_name]
    parts = hf_name.split(".")
    if len(parts) < 5 or parts[:2] != ["model", "layers"]:
        return None
    layer, rest = parts[2], ".".join(parts[3:])
    names = {
        "input_layernorm.weight": "attn_norm.weight",
        "self_attn.q_proj.weight": "attn_q.weight",
        "self_attn.k_proj.weight": "attn_k.weight",
        "self_attn.v_proj.weight": "attn_v.weight",
        "self_attn.o_proj.weight": "attn_output.weight",
        "post_attention_layernorm.weight": "ffn_norm.weight",
        "mlp.gate_proj.weight": "ffn_gate.weight",
        "mlp.up_proj.weight": "ffn_up.weight",
        "mlp.down_proj.weight": "ffn_down.weight",
    }
    return f"blk.{layer}.{names[rest]}" if rest in names else None


def _load_tensors(folder: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ModelError(f"{folder} has no .safetensors weights; save the model with safe_serialization=True")
    tensors: dict[str, np.ndarray] = {}
    for file in files:
        try:
            tensors.update(load_file(str(file)))
        except TypeError as exc:  # bf16 has no numpy dtype
            raise ModelError(f"{file}: {exc}; save the model in float32 or float16 before converting") from exc
    return tensors


def _vocab(folder: Path) -> tuple[list[str], list[int], list[str], dict[str, Any]]:
    data = json.loads((folder / "tokenizer.json").read_text())
    model = data["model"]
    if model.get("type") != "BPE":
        raise ModelError(f"{folder}: only byte-level BPE tokenizers are converted here (found {model.get('type')})")
    vocab: dict[str, int] = dict(model["vocab"])
    special = {t["content"]: t["id"] for t in data.get("added_tokens", [])}
    vocab.update(special)
    tokens = [""] * (max(vocab.values()) + 1)
    for token, index in vocab.items():
        tokens[index] = token
    types = [3 if tok in special else 1 for tok in tokens]  # gguf TokenType: CONTROL 3, NORMAL 1
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    return tokens, types, merges, special


def _rope_theta(config: dict[str, Any]) -> float:
    # transformers 5 nests RoPE settings under rope_parameters; 4.x had rope_theta/rope_scaling at the top.
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    kind = rope.get("rope_type") or rope.get("type") or "default"
    if kind != "default":
        raise ModelError(f"RoPE scaling {kind!r} is not converted here; use llama.cpp's convert_hf_to_gguf.py")
    return float(rope.get("rope_theta") or config.get("rope_theta") or 10000.0)


def convert_llama_to_gguf(folder: Path, target: Path, out_type: str = "f16") -> str:
    """Write `folder` (an HF LlamaForCausalLM with a byte-level BPE tokenizer.json) as GGUF at `target`."""
    import gguf

    if out_type not in OUT_TYPES:
        raise ModelError(f"GGUF output type {out_type!r} is not one of {', '.join(OUT_TYPES)}")
    config = json.loads((folder / "config.json").read_text())
    if config.get("model_type") != "llama":
        raise ModelError(f"{folder} is a {config.get('model_type')!r} model; only Llama is converted here")
    heads, kv_heads = config["num_attention_heads"], config.get("num_key_value_heads", config["num_attention_heads"])
    hidden = config["hidden_size"]
    tokens, types, merges, _special = _vocab(folder)
    writer = gguf.GGUFWriter(str(target), "llama")
    writer.add_name(folder.name)
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(hidden)
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_rope_dimension_count(config.get("head_dim") or hidden // heads)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_rope_freq_base(_rope_theta(config))
    writer.add_file_type(gguf.LlamaFileType.ALL_F32 if out_type == "f32" else gguf.LlamaFileType.MOSTLY_F16)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")  # the GPT-2 split regex, which byte-level BPE in `tokenizers` uses
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    if config.get("bos_token_id") is not None:
        writer.add_bos_token_id(int(config["bos_token_id"]))
    if config.get("eos_token_id") is not None:
        writer.add_eos_token_id(int(config["eos_token_id"]))
    writer.add_add_bos_token(False)
    for hf_name, array in sorted(_load_tensors(folder).items()):
        name = _tensor_name(hf_name)
        if name is None:
            continue  # rotary caches and other buffers are recomputed by llama.cpp
        data = array.astype(np.float32)
        if name.endswith("attn_q.weight"):
            data = permute_qk(data, heads)
        elif name.endswith("attn_k.weight"):
            data = permute_qk(data, kv_heads)
        if out_type == "f16" and data.ndim == 2:
            data = data.astype(np.float16)  # norms stay F32, as in llama.cpp's converter
        writer.add_tensor(name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return f"converted {folder.name} to GGUF {out_type}"
