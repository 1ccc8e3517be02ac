"""``ToTensor``, ``ToDevice``, ``ToTorchImage``, ``Squeeze``, ``Convert`` (FFCV's names)."""


class ToTensor:
    """numpy → torch, sharing memory (``torch.from_numpy``)."""

    def __call__(self, x):
        import torch

        return torch.from_numpy(x)


class ToDevice:
    def __init__(self, device, non_blocking: bool = True):
        self.device = device
        self.non_blocking = non_blocking

    def __call__(self, x):
        return x.to(self.device, non_blocking=self.non_blocking)


class ToTorchImage:
    """NHWC → NCHW (a view; ``channels_last`` keeps the memory layout channels-last)."""

    def __init__(self, channels_last: bool = True, convert_back_int16: bool = True):
        self.channels_last = channels_last

    def __call__(self, x):
        import torch

        x = x.permute(0, 3, 1, 2)
        return x if self.channels_last else x.contiguous(memory_format=torch.contiguous_format)


class Squeeze:
    def __init__(self, *dims):
        self.dims = dims

    def __call__(self, x):
        if not self.dims:
            return x.squeeze()
        for d in sorted(self.dims, reverse=True):
            x = x.squeeze(d)
        return x


class Convert:
    def __init__(self, target_dtype):
        self.target_dtype = target_dtype

    def __call__(self, x):
        if hasattr(x, "astype"):
            return x.astype(self.target_dtype)
        return x.to(self.target_dtype)
