"""Reports what it sees of its own run, for comparing `supplyline doctor` with plain `python`."""

import json
import os
import sys

import torch
from torch.utils.data import DataLoader, Dataset


class ProbeData(Dataset):  # defined in the script: spawn-started workers must unpickle it
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.tensor([i])


if __name__ == "__main__":
    loader = DataLoader(ProbeData(), batch_size=2, num_workers=1, multiprocessing_context="spawn")
    got = sorted(int(v) for b in loader for v in b)
    print(
        "PROBE "
        + json.dumps(
            {
                "argv": sys.argv,
                "name": __name__,
                "path0": sys.path[0],
                "cwd": os.getcwd(),
                "file": __file__,
                "spawned": got,
            }
        )
    )
    sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
