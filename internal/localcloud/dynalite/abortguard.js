// Preloaded into dynalite (node --require): dynalite rethrows a request's
// 'error' event, so a client that aborts a request mid-body (a cancelled Go
// context, a killed test process) would end the server for every other
// client. Client aborts are logged and ignored; anything else still exits.
'use strict'
const clientAborts = new Set(['ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ERR_STREAM_PREMATURE_CLOSE'])
process.on('uncaughtException', (err) => {
  if (err && (clientAborts.has(err.code) || err.message === 'aborted')) {
    console.error('dynalite: ignored aborted client request:', err.code || err.message)
    return
  }
  console.error((err && err.stack) || err)
  process.exit(1)
})
