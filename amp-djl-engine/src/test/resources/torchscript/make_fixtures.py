"""Makes the TorchScript fixtures of djl-amp's engine-autocast tests.

Two small traced models, as DJL's transfer-learning examples load them (a traced torchvision CNN, a
traced Hugging Face encoder), small enough to fine-tune on a CPU in a test:

  traced_cnn.pt      conv/BatchNorm/ReLU x2, global average pooling, Linear: (N, 3, 16, 16) -> (N, 32)
  traced_encoder.pt  one pre-norm transformer encoder layer written out (Q/K/V and output Linear,
                     batched matmul, softmax, LayerNorm, GELU feed-forward), mean over the sequence:
                     (N, 8, 16) -> (N, 16)

Both are traced in eval mode (BatchNorm uses its running statistics, as a model traced for inference
does) from fixed seeds: the same weights wherever it runs, though the archives' bytes differ by
the script's path, which their debug information records. The script writes README.md beside them with the torch version that made
them; libtorch loads archives of older versions.

Run with Debian's torch (apt-get install -y python3-torch):
    /usr/bin/python3 make_fixtures.py
"""

import hashlib
import math
import os

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.fc = nn.Linear(16, 32)

    def forward(self, x):
        return self.fc(self.features(x))


class Encoder(nn.Module):
    def __init__(self, dim=16, heads=2, hidden=32):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x):
        n, t, d = x.shape
        h, e = self.heads, self.head_dim
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q = q.reshape(n, t, h, e).transpose(1, 2)
        k = k.reshape(n, t, h, e).transpose(1, 2)
        v = v.reshape(n, t, h, e).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(e)
        attention = torch.matmul(torch.softmax(scores, dim=-1), v)
        x = x + self.proj(attention.transpose(1, 2).reshape(n, t, d))
        x = x + self.ffn(self.norm2(x))
        return x.mean(dim=1)


def trace(model, example, name):
    torch.manual_seed(1)
    model.eval()
    traced = torch.jit.trace(model, example)
    path = os.path.join(HERE, name)
    traced.save(path)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    size = os.path.getsize(path)
    print(f"{name}: {size} bytes, sha256 {digest}, torch {torch.__version__}")
    return name, size, digest


def main():
    torch.manual_seed(0)
    made = [
        trace(Cnn(), torch.randn(2, 3, 16, 16), "traced_cnn.pt"),
        trace(Encoder(), torch.randn(2, 8, 16), "traced_encoder.pt"),
    ]
    with open(os.path.join(HERE, "README.md"), "w") as f:
        f.write("# TorchScript fixtures\n\n")
        f.write(f"Made by `make_fixtures.py` with torch {torch.__version__} ")
        f.write("(Debian's python3-torch); the script says what each model is. ")
        f.write("libtorch 2.7.1 (DJL 0.36.0's and 0.35.1's PyTorch engine) loads them.\n\n")
        f.write("| file | bytes | sha256 |\n| --- | --- | --- |\n")
        for name, size, digest in made:
            f.write(f"| {name} | {size} | {digest} |\n")


if __name__ == "__main__":
    main()
