package v1alpha1

// Backend is exactly one kopia storage backend.
// +kubebuilder:validation:XValidation:rule="(has(self.azure)?1:0)+(has(self.b2)?1:0)+(has(self.filesystem)?1:0)+(has(self.gcs)?1:0)+(has(self.gdrive)?1:0)+(has(self.rclone)?1:0)+(has(self.s3)?1:0)+(has(self.sftp)?1:0)+(has(self.webDav)?1:0)==1",message="exactly one of azure, b2, filesystem, gcs, gdrive, rclone, s3, sftp, webDav"
type Backend struct {
	// +optional
	Azure *AzureBackend `json:"azure,omitempty"`
	// +optional
	B2 *B2Backend `json:"b2,omitempty"`
	// +optional
	Filesystem *FilesystemBackend `json:"filesystem,omitempty"`
	// +optional
	GCS *GCSBackend `json:"gcs,omitempty"`
	// +optional
	GDrive *GDriveBackend `json:"gdrive,omitempty"`
	// +optional
	Rclone *RcloneBackend `json:"rclone,omitempty"`
	// +optional
	S3 *S3Backend `json:"s3,omitempty"`
	// +optional
	SFTP *SFTPBackend `json:"sftp,omitempty"`
	// +optional
	WebDAV *WebDAVBackend `json:"webDav,omitempty"`
}

// SecretAuth reads backend credentials from a Secret's keys.
type SecretAuth struct {
	SecretRef SecretRef `json:"secretRef"`
}

// ObjectStoreAuth is static credentials from a Secret or the pod's workload identity.
// +kubebuilder:validation:XValidation:rule="(has(self.secretRef)?1:0)+(has(self.workloadIdentity)?1:0)==1",message="exactly one of secretRef, workloadIdentity"
type ObjectStoreAuth struct {
	// SecretRef names a Secret holding the access keys.
	// +optional
	SecretRef *SecretRef `json:"secretRef,omitempty"`
	// WorkloadIdentity uses the mover ServiceAccount's cloud identity.
	// +optional
	WorkloadIdentity *WorkloadIdentity `json:"workloadIdentity,omitempty"`
}

// WorkloadIdentity names the ServiceAccount whose cloud identity the mover assumes.
type WorkloadIdentity struct {
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// BackendTLS tunes TLS to an object store.
type BackendTLS struct {
	// CABundleRef names a ConfigMap or Secret key holding PEM CA certificates.
	// +optional
	CABundleRef *ConfigMapKeyRef `json:"caBundleRef,omitempty"`
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
	// DisableTLS talks plain HTTP to the endpoint.
	// +optional
	DisableTLS bool `json:"disableTls,omitempty"`
}

// S3Backend stores the repository in an S3-compatible bucket.
type S3Backend struct {
	// +kubebuilder:validation:MinLength=3
	Bucket string `json:"bucket"`
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// Endpoint is host[:port] of the S3 service; AWS when empty.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// +optional
	Region string `json:"region,omitempty"`
	// +optional
	Auth *ObjectStoreAuth `json:"auth,omitempty"`
	// +optional
	TLS *BackendTLS `json:"tls,omitempty"`
}

// AzureBackend stores the repository in an Azure Blob container.
type AzureBackend struct {
	// +kubebuilder:validation:MinLength=1
	Container string `json:"container"`
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// +optional
	StorageAccount string `json:"storageAccount,omitempty"`
	// +optional
	StorageDomain string `json:"storageDomain,omitempty"`
	// +optional
	Auth *ObjectStoreAuth `json:"auth,omitempty"`
}

// B2Backend stores the repository in a Backblaze B2 bucket.
type B2Backend struct {
	// +kubebuilder:validation:MinLength=1
	Bucket string `json:"bucket"`
	// +optional
	Prefix string     `json:"prefix,omitempty"`
	Auth   SecretAuth `json:"auth"`
}

// GCSBackend stores the repository in a Google Cloud Storage bucket.
type GCSBackend struct {
	// +kubebuilder:validation:MinLength=1
	Bucket string `json:"bucket"`
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// +optional
	Auth *ObjectStoreAuth `json:"auth,omitempty"`
}

// GDriveBackend stores the repository in a Google Drive folder.
type GDriveBackend struct {
	// +kubebuilder:validation:MinLength=1
	FolderID string     `json:"folderID"`
	Auth     SecretAuth `json:"auth"`
}

// RcloneBackend stores the repository through an rclone remote.
type RcloneBackend struct {
	// RemotePath is remote:path as rclone understands it.
	// +kubebuilder:validation:MinLength=1
	RemotePath string `json:"remotePath"`
	// ConfigSecretRef names a Secret key holding rclone.conf.
	// +optional
	ConfigSecretRef *SecretKeyRef `json:"configSecretRef,omitempty"`
}

// SFTPBackend stores the repository on an SFTP server.
type SFTPBackend struct {
	// +kubebuilder:validation:MinLength=1
	Host string `json:"host"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`
	// +kubebuilder:validation:MinLength=1
	Path string `json:"path"`
	// +kubebuilder:validation:MinLength=1
	Username string `json:"username"`
	// Auth names a Secret with a password or private key and known_hosts.
	Auth SecretAuth `json:"auth"`
}

// WebDAVBackend stores the repository on a WebDAV server.
type WebDAVBackend struct {
	// +kubebuilder:validation:MinLength=1
	URL string `json:"url"`
	// +optional
	Auth *SecretAuth `json:"auth,omitempty"`
}

// FilesystemVolume is the volume a filesystem repository lives on.
// +kubebuilder:validation:XValidation:rule="(has(self.pvc)?1:0)+(has(self.nfs)?1:0)==1",message="exactly one of pvc, nfs"
type FilesystemVolume struct {
	// +optional
	PVC *LocalObjectRef `json:"pvc,omitempty"`
	// +optional
	NFS *NFSExport `json:"nfs,omitempty"`
}

// NFSExport is an NFS server and export path.
type NFSExport struct {
	// +kubebuilder:validation:MinLength=1
	Server string `json:"server"`
	// +kubebuilder:validation:MinLength=1
	Path string `json:"path"`
}

// FilesystemBackend stores the repository on a mounted filesystem.
type FilesystemBackend struct {
	// Path inside the volume (or on the node when no volume is given).
	// +kubebuilder:validation:MinLength=1
	Path string `json:"path"`
	// +optional
	Volume *FilesystemVolume `json:"volume,omitempty"`
}
