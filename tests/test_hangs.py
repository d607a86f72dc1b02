"""``grader.hangs``: the function a timed-out cell hung in, and the tests that would reach it."""

from autograder.grader.hangs import Hangs, innermost_function

# What IPython printed for a cell interrupted in ``helper``, called from ``M.forward`` (In[1]),
# called from a test cell's ``check`` (In[2]): colours included.
TRACEBACK = [
    "\x1b[31mKeyboardInterrupt\x1b[39m                         Traceback (most recent call last)",
    "\x1b[36mCell\x1b[39m\x1b[36m \x1b[39m\x1b[32mIn[2]\x1b[39m\x1b[32m, line 3\x1b[39m\n"
    "----> 3 check(M().forward)\n",
    "\x1b[36mCell\x1b[39m\x1b[36m \x1b[39m\x1b[32mIn[2]\x1b[39m\x1b[32m, line 2\x1b[39m, in "
    "\x1b[36mcheck\x1b[39m\x1b[34m(f)\x1b[39m\n----> 2     return f(1)\n",
    "\x1b[36mCell\x1b[39m\x1b[36m \x1b[39m\x1b[32mIn[1]\x1b[39m\x1b[32m, line 7\x1b[39m, in "
    "\x1b[36mM.forward\x1b[39m\x1b[34m(self, x)\x1b[39m\n----> 7         return helper(x)\n",
    "\x1b[36mCell\x1b[39m\x1b[36m \x1b[39m\x1b[32mIn[1]\x1b[39m\x1b[32m, line 4\x1b[39m, in "
    "\x1b[36mhelper\x1b[39m\x1b[34m(x)\x1b[39m\n----> 4         time.sleep(0.05)\n",
    "\x1b[31mKeyboardInterrupt\x1b[39m: ",
]
LEARNER = (
    "import time\ndef helper(x):\n    while True:\n        time.sleep(0.05)\n"
    "class M:\n    def forward(self, x):\n        return helper(x)\n"
)


def test_the_innermost_frame_of_the_learners_cells_names_the_function():
    assert innermost_function(TRACEBACK, {1}) == "helper"
    assert innermost_function(TRACEBACK, {2}) == "check"  # only the cells given count
    assert innermost_function(TRACEBACK, {5}) is None
    assert innermost_function(["KeyboardInterrupt: "], {1}) is None  # a loop at a cell's top


def test_a_test_that_reaches_the_hung_function_is_blocked_and_others_are_not():
    hangs = Hangs()
    assert hangs.blocking("check(M().forward)", [LEARNER]) is None  # nothing hung yet
    assert hangs.record(TRACEBACK, {1}, "cell 2 (`test_m`)") == "helper"
    why = hangs.blocking("assert M().forward(2) == 0", [LEARNER])  # through M's method
    assert why == (
        "`helper` did not return within the time limit in cell 2 (`test_m`); this test calls it too"
    )
    assert hangs.blocking("assert softmax(x) is not None", [LEARNER]) is None
    assert hangs.blocking("this is not python (", [LEARNER]) is None
