import FaultlineCore

// `FaultlineControl`, `Report`, `PolicyState` and `FaultlineWaitTimeout` live in FaultlineCore (FoundationEssentials
// only), so the server and the `faultline` binary link neither Foundation's ICU nor FoundationNetworking's libcurl.
// `FaultlineRemote`, which drives a server in another process over URLSession, is in FaultlineClient: a test that
// uses it imports FaultlineClient (ARCHITECTURE §1).
extension FaultlineServer: FaultlineControl {}
