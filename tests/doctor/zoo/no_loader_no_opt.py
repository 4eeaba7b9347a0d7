"""No DataLoader and no optimizer: tensors made in the loop, a hand-written SGD update."""

import torch

if __name__ == "__main__":
    w = torch.randn(256, 256, requires_grad=True)
    for _step in range(60):
        x = torch.randn(64, 256)
        loss = (x @ w).pow(2).mean()
        loss.backward()
        with torch.no_grad():
            w -= 0.001 * w.grad
            w.grad = None
