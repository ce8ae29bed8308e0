#pragma once
// The shim's command hook as the fusion engine sees it (Note [The command
// hook protocol] in hotkernel/hotkernel_shim.h), behind a thin interface so
// that the engine is tested on the CPU with a fake that fires "foreign
// commands" where a GPU command would be.

#include <memory>

namespace hotkernel::fusion {

using FlushHook = void (*)(int kind);

class CommandGate {
 public:
  virtual ~CommandGate() = default;
  // Whether every command hotkernel does not issue reaches the flush hook:
  // the shim is in the process, speaks protocol version 1 and handed out no
  // unwrapped driver entry point. Without it nothing may be deferred.
  virtual bool covers() = 0;
  virtual void setFlushHook(FlushHook hook) = 0;
  // What is pending (chains and open learning windows); 0: the hook is not called.
  virtual void setPending(int count) = 0;
  // The per-thread, nestable guard around commands hotkernel issues.
  virtual void enterOwn() = 0;
  virtual void leaveOwn() = 0;
};

// The shim's gate, looked up with dlsym(RTLD_DEFAULT); a gate that covers
// nothing when the shim is absent or of another version.
std::unique_ptr<CommandGate> shimCommandGate();

// Commands issued in its scope are hotkernel's own.
class OwnCommands {
 public:
  explicit OwnCommands(CommandGate& gate) : gate_(gate) { gate_.enterOwn(); }
  ~OwnCommands() { gate_.leaveOwn(); }
  OwnCommands(const OwnCommands&) = delete;
  OwnCommands& operator=(const OwnCommands&) = delete;

 private:
  CommandGate& gate_;
};

}  // namespace hotkernel::fusion
