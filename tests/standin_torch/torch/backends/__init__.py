from torch.backends import cudnn  # noqa: F401
