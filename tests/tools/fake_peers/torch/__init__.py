"""A stand-in for the few torch calls tools/bench_torchvision.py makes, over numpy, so that the
script's paths run in tests on hosts without torch or a GPU. Not torch: nothing here is timed
for real."""

__version__ = "fake"


class device:
    def __init__(self, name):
        self.type = name


class Tensor:
    def __init__(self, array, on="cpu"):
        self.array = array
        self.on = on

    def to(self, target, non_blocking=False):
        return Tensor(self.array.copy(), target.type)

    def pin_memory(self):
        return Tensor(self.array, "cpu")

    def cpu(self):
        return Tensor(self.array, "cpu")

    def numpy(self):
        assert self.on == "cpu", "numpy() of a CUDA tensor"
        return self.array


def from_numpy(array):
    return Tensor(array)


class cuda:
    @staticmethod
    def is_available():
        return True

    @staticmethod
    def get_device_name():
        return "Fake GPU"

    @staticmethod
    def synchronize():
        pass

    @staticmethod
    def empty_cache():
        pass
