// `FaultlineRemote`, `FaultlineControl`, `Report` and the typed admin answers moved to the FaultlineClient
// library (Foundation and FaultlineCore only, no libevent, for test bundles that drive a server in another
// process). Re-exported so that code written when they lived here, `import Faultline` alone, still compiles.
@_exported import FaultlineClient

extension FaultlineServer: FaultlineControl {}
