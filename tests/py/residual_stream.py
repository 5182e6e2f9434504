"""A small residual network for the bf16 and int8 edge tests: a stem
(conv -> relu), then blocks of conv 1x1 -> relu -> conv 3x3 -> add
[-> relu], each block's output read by the next block's first convolution
(its activation) and by the next block's add (its residual); the last
block's output is the graph's."""
import torch
from torch import nn


class ResStream(nn.Module):
    def __init__(self, blocks, width, relu_after, seed):
        """`relu_after`: the indices of the blocks whose add a relu follows."""
        super().__init__()
        torch.manual_seed(seed)
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.blocks = nn.ModuleList(nn.ModuleList([nn.Conv2d(16, width, 1), nn.Conv2d(width, 16, 3, padding=1)])
                                    for _ in range(blocks))
        self.relu_after = tuple(relu_after)

    def forward(self, x):
        r = torch.relu(self.stem(x))
        for i, (c1, c2) in enumerate(self.blocks):
            y = c2(torch.relu(c1(r))) + r
            r = torch.relu(y) if i in self.relu_after else y
        return r
