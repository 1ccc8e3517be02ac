"""FFCV's ``ffcv.transforms.utils``: helpers of the batch transforms (``fast_crop``)."""
