"""The Icraft XRT manual's four Python examples, verbatim (its sections 1.1.1, 1.1.2,
1.1.3 and 1.2), as `tests/integration/test_manual_verbatim.py` runs them.

Copied byte for byte from the manual (``../shared/seeds/000_15ee72ecd555691c.txt`` beside
the repository); the test checks the copy against the manual whenever the manual is there.
Do not reformat: ruff leaves this file alone (pyproject.toml).
"""

CREATE_BY_PRIORITY = """# 导入必要的库
import xir
from xrt import *
from host_backend import *
from buyi_backend import *
import unittest

# 获取一个网络
# Input → Conv2d → Cast → HardOp → Cast → ReLU → MaxPool2d → Output
network = GenerateNetwork()

# 创建Session，按顺序传入想要绑定的后端类型
sess1 = Session.Create([BuyiBackend, HostBackend], network.view(0), [ HostDevice.Default(), Device() ])
sess1.apply()

backend_bindings = sess1.backendBindings()
self.assertTrue(backend_bindings[1].is_type(HostBackend)) # Conv2d
self.assertTrue(backend_bindings[2].is_type(HostBackend)) # Cast
self.assertTrue(backend_bindings[3].is_type(BuyiBackend)) # HardOp
self.assertTrue(backend_bindings[4].is_type(BuyiBackend)) # Cast
self.assertTrue(backend_bindings[5].is_type(HostBackend)) # ReLU
self.assertTrue(backend_bindings[6].is_type(HostBackend)) # MaxPool2d

# 也可以使用CreateByOrder方法，将算子按顺序绑定到已有的Backend对象上
sess2 = Session.CreateByOrder(network.view(0), [BuyiBackend.Init(), HostBackend.Init()], [ HostDevice.Default(), Device() ])
"""

CREATE_WITH_BACKENDS = """# 导入必要的库
import xir
from xrt import *
from host_backend import *
from buyi_backend import *
import unittest

# 获取一个网络
# Input → Conv2d → Cast → HardOp → Cast → ReLU → MaxPool2d → Output
network = GenerateNetwork()

# 创建HostBackend，绑定算子0, 1, 2, 5, 6, 7
host_backend = Backend.Create(HostBackend, network.view([0, 1, 2, 5, 6, 7]), HostDevice.Default())
# 创建BuyiBackend，绑定算子3, 4
buyi_backend = Backend.Create(BuyiBackend, network.view([3, 4]), Device())

# 创建Session
# 直接使用指定后端已有的绑定关系
sess = Session.CreateWithBackends(network.view(0), [ host_backend, buyi_backend ])
sess.apply()

backend_bindings = sess.backendBindings()
self.assertTrue(backend_bindings[1].is_type(HostBackend)) # Conv2d
self.assertTrue(backend_bindings[2].is_type(HostBackend)) # Cast
self.assertTrue(backend_bindings[3].is_type(BuyiBackend)) # HardOp
self.assertTrue(backend_bindings[4].is_type(BuyiBackend)) # Cast
self.assertTrue(backend_bindings[5].is_type(HostBackend)) # ReLU
self.assertTrue(backend_bindings[6].is_type(HostBackend)) # MaxPool2d
"""

CREATE_WITH_SNAPSHOT = """# 直接使用序列化得到的快照文件创建Session
sess = Session.CreateWithSnapshot(snapshot_file,[ BuyiBackend, HostBackend ],[device, HostDevice.Default()])
"""

DUMP_SNAPSHOT = """# 打开设备

# 加载网络

# 创建Session

# 部署session

# 序列化session，并保存快照文件至指定路径
sess.dumpSnapshot(filepath)
"""

EXAMPLES = {
    "CREATE_BY_PRIORITY": CREATE_BY_PRIORITY,
    "CREATE_WITH_BACKENDS": CREATE_WITH_BACKENDS,
    "CREATE_WITH_SNAPSHOT": CREATE_WITH_SNAPSHOT,
    "DUMP_SNAPSHOT": DUMP_SNAPSHOT,
}
