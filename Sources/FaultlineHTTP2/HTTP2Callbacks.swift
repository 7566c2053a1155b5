import CNghttp2
import FaultlineCore

extension HTTP2Connection {
    // MARK: - nghttp2's callbacks

    static func connection(_ user: UnsafeMutableRawPointer?) -> HTTP2Connection {
        Unmanaged<HTTP2Connection>.fromOpaque(user!).takeUnretainedValue()
    }

    /// A receiving callback's answer once a script closed the connection inside `mem_recv`: stop parsing, so no
    /// later frame in the same read begins or dispatches a stream on the closed connection.
    static func stopped(_ user: UnsafeMutableRawPointer?) -> Bool { connection(user).closed }
    static let stop = Int32(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)

    static func install(_ callbacks: OpaquePointer?) {
        nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks) { _, header, user in
            guard let header, header.pointee.type == UInt8(NGHTTP2_HEADERS.rawValue), !HTTP2Connection.stopped(user)
            else { return 0 }
            HTTP2Connection.connection(user).headersBegin(header.pointee.stream_id)
            return 0
        }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
                  frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else { return 0 }
            if HTTP2Connection.stopped(user) { return HTTP2Connection.stop }
            HTTP2Connection.connection(user).beginStream(frame.pointee.hd.stream_id)
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, user in
            guard let frame else { return 0 }
            if HTTP2Connection.stopped(user) { return HTTP2Connection.stop }
            let accepted = HTTP2Connection.connection(user).header(
                frame.pointee.hd.stream_id, name: UnsafeRawBufferPointer(start: name, count: nameLength),
                value: UnsafeRawBufferPointer(start: value, count: valueLength))
            return accepted ? 0 : Int32(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, user in
            if HTTP2Connection.stopped(user) { return HTTP2Connection.stop }
            HTTP2Connection.connection(user).data(streamID, UnsafeRawBufferPointer(start: data, count: length))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            guard let frame else { return 0 }
            if HTTP2Connection.stopped(user) { return HTTP2Connection.stop }
            let header = frame.pointee.hd
            let type = header.type
            if type == UInt8(NGHTTP2_PING.rawValue) { HTTP2Connection.connection(user).pingReceived(frame) }
            if type == UInt8(NGHTTP2_GOAWAY.rawValue) { HTTP2Connection.connection(user).goawayReceived(frame) }
            if type == UInt8(NGHTTP2_RST_STREAM.rawValue) { HTTP2Connection.connection(user).resetReceived(frame) }
            if (type == UInt8(NGHTTP2_HEADERS.rawValue) || type == UInt8(NGHTTP2_DATA.rawValue))
                && header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0 {
                HTTP2Connection.connection(user).requestComplete(header.stream_id)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks) { _, frame, libraryError, user in
            guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
                  frame.pointee.hd.stream_id % 2 == 1, !HTTP2Connection.stopped(user) else { return 0 }
            HTTP2Connection.connection(user).requestRefused(frame.pointee.hd.stream_id, libraryError: libraryError)
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, user in
            guard let frame else { return 0 }
            HTTP2Connection.connection(user).frameSent(frame)
            return 0
        }
        nghttp2_session_callbacks_set_error_callback2(callbacks) { _, _, message, length, user in
            if let message {
                HTTP2Connection.connection(user).lastLibraryError = String(
                    decoding: UnsafeRawBufferPointer(start: message, count: length), as: UTF8.self)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, user in
            HTTP2Connection.connection(user).streamClosed(streamID, errorCode: errorCode)
            return 0
        }
    }
}
