"""pstranspile: parameter-server transpilation of PaddlePaddle programs.

    from transpile import load, save, split, load_config
    result = split(load("main.pb"), load("startup.pb"), load_config("cluster.yaml"))
"""
from .core.config import ClusterConfig, load_config
from .format.programio import load, save
from .ir.program import Attr, Block, Op, Program, Var
from .output.result import SplitResult
from .split import split

__all__ = ["Attr", "Block", "ClusterConfig", "Op", "Program", "SplitResult", "Var", "load",
           "load_config", "save", "split"]
