#!/usr/bin/python3
"""PyTorch's side of bench/train/peer-check/check.sh: loads what TransformerBlockDump wrote into
pytorch_resnet.py's TransformerEncoder (the transformer-256 peer's block), runs the same
training-mode forward and compares the output and the BatchNorm running statistics. Exit 1 when
they differ by more than 1e-5."""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pytorch_resnet  # noqa: E402

dump = json.load(open(sys.argv[1]))
block = pytorch_resnet.TransformerEncoder(16, 4, 32)
a, n1, ff, n2 = block.attention, block.attention_norm.norm, block.feed_forward, block.output_norm.norm
# DJL's parameter order: key, query, value, result projections; attentionNorm (gamma, beta,
# runningMean, runningVar); the feed-forward Linears; outputNorm
tensors = [a.key.weight, a.key.bias, a.query.weight, a.query.bias, a.value.weight, a.value.bias,
           a.result.weight, a.result.bias, n1.weight, n1.bias, n1.running_mean, n1.running_var,
           ff[0].weight, ff[0].bias, ff[2].weight, ff[2].bias,
           n2.weight, n2.bias, n2.running_mean, n2.running_var]
with torch.no_grad():
    for tensor, values in zip(tensors, dump["before"]):
        tensor.copy_(torch.tensor(values).reshape(tensor.shape))
block.train()
y = block(torch.tensor(dump["x"]).reshape(3, 5, 16))
worst = (y - torch.tensor(dump["y"]).reshape(y.shape)).abs().max().item()
print("output: max |PyTorch - DJL| = %.3g (outputs up to %.3g)" % (worst, y.abs().max().item()))
for tensor, after in zip(tensors, dump["after"]):
    if "running" in after["name"]:
        diff = (tensor - torch.tensor(after["data"]).reshape(tensor.shape)).abs().max().item()
        print("%s after the forward: max difference %.3g" % (after["name"], diff))
        worst = max(worst, diff)
sys.exit(0 if worst < 1e-5 else 1)
