#!/usr/bin/python3
"""Exports a BERT-style encoder (hand-written multi-head attention in the
[B, H, S, D] layout, Q K^T / sqrt(d), a padding mask from attention_mask as
HF builds it: (1 - mask) * float's lowest) with torch's TorchScript exporter,
at a fixed sequence length, for checking that every attention compiles to one
kernel (`kiln inspect MODEL --target cpu`) and for timing it against ONNX
Runtime.

    /usr/bin/python3 bench/attention/export_encoder.py --seq 128 -o /tmp/bert_s128.onnx
"""
import argparse
import math

import torch


class Layer(torch.nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads, self.d = heads, hidden // heads
        self.q, self.k, self.v, self.o = (torch.nn.Linear(hidden, hidden) for _ in range(4))
        self.ln1, self.ln2 = torch.nn.LayerNorm(hidden), torch.nn.LayerNorm(hidden)
        self.ff = torch.nn.Sequential(torch.nn.Linear(hidden, 4 * hidden), torch.nn.GELU(),
                                      torch.nn.Linear(4 * hidden, hidden))

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.d).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d) + mask
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).contiguous()
        x = self.ln1(x + self.o(ctx.view(x.shape)))
        return self.ln2(x + self.ff(x))


class Encoder(torch.nn.Module):
    def __init__(self, layers, hidden, heads, vocab=1000):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, hidden)
        self.layers = torch.nn.ModuleList(Layer(hidden, heads) for _ in range(layers))

    def forward(self, input_ids, attention_mask):
        mask = attention_mask[:, None, None, :].to(torch.float32)
        mask = (1.0 - mask) * torch.finfo(torch.float32).min
        x = self.emb(input_ids)
        for layer in self.layers:
            x = layer(x, mask)
        return x


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("-o", "--output", required=True)
    opts = ap.parse_args()
    torch.manual_seed(0)
    model = Encoder(opts.layers, opts.hidden, opts.heads).eval()
    ids = torch.randint(0, 1000, (1, opts.seq))
    mask = torch.ones(1, opts.seq, dtype=torch.int64)
    torch.onnx.export(model, (ids, mask), opts.output, input_names=["input_ids", "attention_mask"],
                      output_names=["hidden"], opset_version=14,
                      dynamic_axes={"input_ids": {0: "batch"}, "attention_mask": {0: "batch"}})


if __name__ == "__main__":
    main()
