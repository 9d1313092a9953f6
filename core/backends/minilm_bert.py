"""all-MiniLM-L6-v2's six BERT layers written out in plain torch (`build_bert`), with bfloat16 matmuls as an option
and an export mode for ONNX; core/backends/minilm_runtime.py runs it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

from core.protocols import BackendError


def build_bert(model_dir: Path):
    """BertModel of config.json with the weights of model.safetensors, returning mean-pooled (unnormalised) vectors.

    Written out instead of loading transformers.BertModel: importing transformers alone takes ~3 s, and this graph
    exports to ONNX without tracer warnings. Equal to sentence-transformers' Transformer + Pooling in float32.
    """
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file

    cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    if cfg.get("model_type") != "bert" or cfg.get("hidden_act") != "gelu":
        raise BackendError(f"unexpected model config: {cfg.get('model_type')}/{cfg.get('hidden_act')}")
    w = load_file(str(model_dir / "model.safetensors"))

    def p(t):
        return torch.nn.Parameter(t.contiguous(), requires_grad=False)

    class Layer(torch.nn.Module):
        def __init__(self, pre: str):
            super().__init__()
            att = pre + "attention."
            self.qkv_w = p(torch.cat([w[f"{att}self.{n}.weight"] for n in ("query", "key", "value")]))
            self.qkv_b = p(torch.cat([w[f"{att}self.{n}.bias"] for n in ("query", "key", "value")]))
            self.o_w, self.o_b = p(w[att + "output.dense.weight"]), p(w[att + "output.dense.bias"])
            self.ln1_w, self.ln1_b = p(w[att + "output.LayerNorm.weight"]), p(w[att + "output.LayerNorm.bias"])
            self.i_w, self.i_b = p(w[pre + "intermediate.dense.weight"]), p(w[pre + "intermediate.dense.bias"])
            self.f_w, self.f_b = p(w[pre + "output.dense.weight"]), p(w[pre + "output.dense.bias"])
            self.ln2_w, self.ln2_b = p(w[pre + "output.LayerNorm.weight"]), p(w[pre + "output.LayerNorm.bias"])

    class Bert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = int(cfg["hidden_size"])
            self.heads = int(cfg["num_attention_heads"])
            self.eps = float(cfg["layer_norm_eps"])
            e = "embeddings."
            self.word = p(w[e + "word_embeddings.weight"])
            self.pos = p(w[e + "position_embeddings.weight"])
            self.type0 = p(w[e + "token_type_embeddings.weight"][0])  # token_type_ids are all 0
            self.ln_w, self.ln_b = p(w[e + "LayerNorm.weight"]), p(w[e + "LayerNorm.bias"])
            n_layers = int(cfg["num_hidden_layers"])
            self.layers = torch.nn.ModuleList(Layer(f"encoder.layer.{i}.") for i in range(n_layers))
            self.mm_dtype = torch.float32  # dtype of the matmuls and attention; the rest stays float32
            self.export_mode = False  # explicit softmax attention instead of SDPA, for the ONNX export

        def to_bf16_matmuls(self):
            self.mm_dtype = torch.bfloat16
            for layer in self.layers:
                for n in ("qkv_w", "qkv_b", "o_w", "o_b", "i_w", "i_b", "f_w", "f_b"):
                    setattr(layer, n, p(getattr(layer, n).to(torch.bfloat16)))
            return self

        def forward(self, input_ids, attention_mask):
            b, s = input_ids.shape
            h, d = self.heads, self.hidden // self.heads
            x = F.embedding(input_ids, self.word) + self.pos[:s] + self.type0
            x = F.layer_norm(x, (self.hidden,), self.ln_w, self.ln_b, self.eps)
            mm = self.mm_dtype
            if self.export_mode:
                bias = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
            else:
                keep = attention_mask[:, None, None, :].to(torch.bool)
            # a ModuleList is typed as holding Modules (whose attributes read as Tensor | Module): these are the Layers
            for L in cast("list[Layer]", self.layers):
                qkv = F.linear(x.to(mm), L.qkv_w, L.qkv_b).view(b, s, 3, h, d).permute(2, 0, 3, 1, 4)
                q, k, v = qkv[0], qkv[1], qkv[2]
                if self.export_mode:
                    scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / d**0.5) + bias
                    a = torch.matmul(torch.softmax(scores, dim=-1), v)
                else:
                    a = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
                a = a.transpose(1, 2).reshape(b, s, self.hidden)
                x = F.layer_norm(x + F.linear(a, L.o_w, L.o_b).float(), (self.hidden,), L.ln1_w, L.ln1_b, self.eps)
                y = F.linear(F.gelu(F.linear(x.to(mm), L.i_w, L.i_b)), L.f_w, L.f_b)
                x = F.layer_norm(x + y.float(), (self.hidden,), L.ln2_w, L.ln2_b, self.eps)
            m = attention_mask.to(torch.float32).unsqueeze(-1)
            return (x * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)

    return Bert().eval()
