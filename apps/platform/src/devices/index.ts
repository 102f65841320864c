// Device identity: enrolment, the device CA, mutual TLS on the devices host, certificate renewal.
export { type DeviceIdentity, deviceFromClientCertificate } from './authenticate.js';
export { DEVICE_CA_FILES, type DeviceCa } from './ca.js';
export { devicesFeature } from './routes.js';
export {
  type DeviceIdentitySettings,
  loadDeviceIdentitySettings,
} from './settings.js';
export { type CertificateState, certificateState } from './state.js';
export { type DevicesHttpsOptions, devicesHttpsOptions } from './tls.js';
