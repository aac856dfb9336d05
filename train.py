"""Train the Vision Transformer: ``python train.py --dataset mnist`` (see ``--help``).

Runs on CUDA, MPS or CPU; under ``torchrun --nproc_per_node=N train.py ...`` it trains with DDP.
"""

from vit_demo.training.run import main

if __name__ == "__main__":
    main()
