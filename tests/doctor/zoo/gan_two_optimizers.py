"""Two optimizers step per batch (a GAN), plus a validation loop over a second DataLoader each epoch."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

if __name__ == "__main__":
    gen, disc = nn.Linear(16, 32), nn.Linear(32, 1)
    opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
    train = DataLoader(TensorDataset(torch.randn(640, 32)), batch_size=32)
    val = DataLoader(TensorDataset(torch.randn(320, 32)), batch_size=32)
    batches = 0
    for _epoch in range(2):
        for (real,) in train:
            batches += 1
            fake = gen(torch.randn(32, 16))
            d_loss = disc(fake.detach()).mean() - disc(real).mean()
            opt_d.zero_grad()
            d_loss.backward()
            opt_d.step()
            g_loss = -disc(fake).mean()
            opt_g.zero_grad()
            g_loss.backward()
            opt_g.step()
        with torch.no_grad():
            for (v,) in val:
                disc(v).mean()
    print(f"BATCHES {batches}")
