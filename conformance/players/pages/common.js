// What every page keeps for the driver (driver.mjs): the player's name and
// version, its errors and events, and a sample of the video element. The
// driver reads window.wai.sample() every half second; the pathways and the
// steering server log the requests themselves.
'use strict';
window.wai = {
  player: '',
  version: '',
  events: [],
  errors: [],
  video: document.getElementById('video'),
  src: new URLSearchParams(location.search).get('src'),
  event(kind, detail) {
    this.events.push({ t: Date.now(), kind, detail });
  },
  error(text, fatal) {
    this.errors.push({ t: Date.now(), text: String(text), fatal: !!fatal });
  },
  // sample returns what has changed since the last sample: the state of the
  // video element, and the events and errors not yet taken.
  sample() {
    const v = this.video;
    let bufferedEnd = 0;
    if (v.buffered.length > 0) {
      bufferedEnd = v.buffered.end(v.buffered.length - 1);
    }
    const s = {
      player: this.player,
      version: this.version,
      t: Date.now(),
      currentTime: v.currentTime,
      readyState: v.readyState,
      paused: v.paused,
      ended: v.ended,
      bufferedEnd,
      visibility: document.visibilityState,
      dropped: v.getVideoPlaybackQuality ? v.getVideoPlaybackQuality().droppedVideoFrames : 0,
      events: this.events,
      errors: this.errors,
    };
    this.events = [];
    this.errors = [];
    return s;
  },
};
// dash.js looks up each segment's Resource Timing entry to time it; the
// browser keeps 250 entries unless told otherwise, fewer than a long run
// makes.
performance.setResourceTimingBufferSize(100000);
window.addEventListener('error', (e) => wai.error('page: ' + e.message, true));
window.addEventListener('unhandledrejection', (e) => wai.error('page: unhandled rejection: ' + e.reason, true));
wai.video.addEventListener('error', () => {
  const e = wai.video.error;
  wai.error('video element: ' + (e ? e.code + ' ' + e.message : 'unknown'), true);
});
