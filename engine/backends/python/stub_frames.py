# The kinds of frame ("t") on the stub's channel, named once for the Python
# side. engine/backends/python/stub-frames.ts declares the same kinds as typed
# unions; test/unit/python-stub-frames.test.ts imports this module and checks
# that the two lists match exactly. Constants only: importing it has no effects.

# engine -> stub
AUTOCOMPLETE = "autocomplete"
INIT = "init"
EXEC = "exec"
FINI = "fini"
IS_READY = "is_ready"
BLS_REPLY = "bls_reply"
CANCEL = "cancel"
MODEL_CONTROL_REPLY = "model_control_reply"

# stub -> engine
INIT_ERROR = "init_error"
CONFIG = "config"
READY = "ready"
EXEC_DONE = "exec_done"
RESP = "resp"
BLS = "bls"
IS_READY_REPLY = "is_ready_reply"
BLS_CANCEL = "bls_cancel"
FINI_DONE = "fini_done"
HELLO = "hello"
MODEL_CONTROL = "model_control"

ENGINE_FRAMES = (AUTOCOMPLETE, INIT, EXEC, FINI, IS_READY, BLS_REPLY, CANCEL, MODEL_CONTROL_REPLY)
STUB_FRAMES = (INIT_ERROR, CONFIG, READY, EXEC_DONE, RESP, BLS, IS_READY_REPLY, FINI_DONE, BLS_CANCEL, HELLO, MODEL_CONTROL)
